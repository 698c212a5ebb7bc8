"""Collection through a `pinchpoint agent`: the same interface as LocalCollector, over HTTP.

Nothing here raises once the collector exists: an agent that cannot be reached, or that
is lost during the run, becomes a problem (named in collection.json and on the terminal)
and the run goes on with what the other collectors give.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from pinchpoint.collect.logs.reader import FileCounts, TierBatch, TierRow
from pinchpoint.collect.resources.sampler import GENERATOR, HOST, conform
from pinchpoint.collect.sources.protocol import AGENT_SELF, ARROW_STREAM, COMPONENTS, run_path
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Agent, Component
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

BATCH_ROWS = 8192


class AgentError(Exception):
    """An agent answered, but not with what was asked."""


class RemoteCollector:
    """The plan's components on one agent. Resource rows of the agent's host and process
    come back as `host@<agent>` and `agent@<agent>`; times are moved onto this host's
    clock when the agent's clock is off by more than the round trip."""

    def __init__(self, agent: Agent, components: Sequence[Component]) -> None:
        self.name: str | None = agent.name
        self.agent = agent
        self.components = [c.name for c in components]
        self.problems: list[str] = []
        self.run_id: str | None = None
        headers = {"Accept": "application/json"}
        token = agent.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        verify: ssl.SSLContext | bool = True
        if agent.ca_file:
            try:
                verify = ssl.create_default_context(cafile=agent.ca_file)
            except (OSError, ssl.SSLError) as e:
                raise PlanError(f"agent {agent.name!r}: ca_file {agent.ca_file}: {e}") from None
        self._client = httpx.Client(
            base_url=agent.url,
            headers=headers,
            timeout=httpx.Timeout(agent.timeout),
            verify=verify,
            trust_env=False,
        )
        self._watched: list[str] = []
        self._lost: str | None = None
        self._started = False
        self._info: dict[str, Any] = {}
        self._offset_s = 0.0
        self._rtt_s: float | None = None
        self._component_errors: dict[str, str] = {}
        self._marks: dict[str, Any] = {}

    # -- the collector interface -------------------------------------------------------

    def start(self, run_id: str, interval_s: float) -> None:
        self.run_id = run_id
        try:
            self._info = self._call("GET", COMPONENTS, timed=True)
            offered = {c["name"] for c in self._info.get("components", [])}
            self._watched = [n for n in self.components if n in offered]
            for name in self.components:
                if name not in offered:
                    self._component_errors[name] = f"agent {self.agent.name!r} does not watch it"
                    self.problems.append(
                        f"agent {self.agent.name}: does not watch component {name!r} "
                        f"(it watches {', '.join(sorted(offered)) or 'nothing'})"
                    )
            body = {"interval_s": interval_s, "components": self._watched}
            started = self._call("POST", run_path(run_id, "start"), json=body)
            self._marks = started.get("marks", {})
            self._started = True
        except (httpx.HTTPError, AgentError, ValueError) as e:
            self._lose("start", e)

    def _run_id(self) -> str:
        if self.run_id is None:
            raise AgentError("no run started on this agent")
        return self.run_id

    def stop(self) -> None:
        if not self._started or self._lost:
            return
        try:
            stopped = self._call("POST", run_path(self._run_id(), "stop"))
        except (httpx.HTTPError, AgentError, ValueError) as e:
            self._lose("stop", e)
            return
        problems = stopped.get("problems")
        if isinstance(problems, list):
            self.problems.extend(f"agent {self.agent.name}: {p}" for p in problems)

    def resources(self) -> pa.Table:
        if not self._started or self._lost:
            return RESOURCES_SCHEMA.empty_table()
        try:
            response = self._client.get(
                run_path(self._run_id(), "resources"), headers={"Accept": ARROW_STREAM}
            )
            _check(response)
            table = conform(pa.ipc.open_stream(response.content).read_all())
        except (httpx.HTTPError, AgentError, pa.ArrowException, ValueError) as e:
            self._lose("resources", e)
            return RESOURCES_SCHEMA.empty_table()
        return self._relabel(table)

    def collect_logs(self, sink: Callable[[TierBatch], None]) -> list[FileCounts]:
        counts: list[FileCounts] = []
        for name in self._watched:
            if self._lost or not self._started:
                break
            try:
                counts.extend(self._component_logs(name, sink))
            except _Broken as e:
                self._component_errors[name] = str(e)
                self.problems.append(f"agent {self.agent.name}: {e}")
        if self._lost:
            for name in self.components:
                self._component_errors.setdefault(name, f"agent {self.agent.name!r} was lost")
        return counts

    def report(self) -> dict[str, Any]:
        host = self._info.get("agent", {})
        return {
            "url": self.agent.url,
            "status": "lost" if self._lost else "ok",
            "hostname": host.get("hostname"),
            "cpu_count": host.get("cpu_count"),
            "clock_offset_s": self._offset_s,
            "rtt_s": self._rtt_s,
            "components": self.components,
            "component_errors": dict(self._component_errors),
            "problems": list(self.problems),
        }

    def log_marks(self) -> dict[str, Any]:
        """Where the agent marked each log (paths on the agent's host)."""
        return {name: {**mark, "agent": self.agent.name} for name, mark in self._marks.items()}

    def close(self) -> None:
        self._client.close()

    # -- helpers -----------------------------------------------------------------------

    def _call(
        self, method: str, path: str, json: Any = None, timed: bool = False
    ) -> dict[str, Any]:
        sent = time.time()
        response = self._client.request(method, path, json=json)
        received = time.time()
        _check(response)
        data = response.json()
        if not isinstance(data, dict):
            raise AgentError(f"{method} {path}: expected a JSON object")
        if timed and isinstance(data.get("time"), int | float):
            self._rtt_s = received - sent
            offset = float(data["time"]) - (sent + received) / 2
            # Within the round trip the clocks cannot be told apart: keep the agent's times.
            self._offset_s = offset if abs(offset) > self._rtt_s else 0.0
        return data

    def _lose(self, during: str, error: Exception) -> None:
        self._lost = self._lost or during
        message = (
            f"agent {self.agent.name} ({self.agent.url}) failed at {during}: {_describe(error)}"
        )
        self.problems.append(message)

    def _relabel(self, table: pa.Table) -> pa.Table:
        names = {HOST: f"{HOST}@{self.agent.name}", AGENT_SELF: f"{AGENT_SELF}@{self.agent.name}"}
        component = [names.get(c, c) for c in table.column("component").to_pylist()]
        table = table.set_column(1, "component", pa.array(component, pa.string()))
        keep = pc.invert(pc.equal(table.column("component"), GENERATOR))
        table = table.filter(keep)
        if self._offset_s:
            table = table.set_column(0, "ts", pc.subtract(table.column("ts"), self._offset_s))
        return table

    def _component_logs(self, name: str, sink: Callable[[TierBatch], None]) -> list[FileCounts]:
        path = run_path(self._run_id(), "logs", name)
        received = 0
        try:
            with self._client.stream("GET", path, headers={"Accept": "application/x-ndjson"}) as r:
                _check(r, read=True)
                batch: list[TierRow] = []
                for item in _ndjson(r.iter_lines()):
                    if "error" in item:
                        raise _Broken(f"{name}: the agent stopped reading: {item['error']}")
                    if item.get("end"):
                        sink(batch)
                        return [_counts(name, f) for f in item.get("files", [])]
                    batch.append(self._row(name, item))
                    received += 1
                    if len(batch) >= BATCH_ROWS:
                        sink(batch)
                        batch = []
                sink(batch)
        except (httpx.HTTPError, AgentError, ValueError, KeyError, TypeError) as e:
            if isinstance(e, httpx.TransportError):
                self._lose(f"logs of {name}", e)
            raise _Broken(
                f"{name}: log stream failed after {received} records: {_describe(e)}"
            ) from e
        raise _Broken(f"{name}: log stream ended early, after {received} records")

    def _row(self, name: str, item: dict[str, Any]) -> TierRow:
        ts = item.get("ts")
        if ts is not None and self._offset_s:
            ts = float(ts) - self._offset_s
        return TierRow(
            component=name,
            users=int(item["users"]),
            req_id=item.get("req_id"),
            ts=ts,
            duration_s=float(item["duration_s"]),
            upstream_s=item.get("upstream_s"),
            status=item.get("status"),
            queue_s=item.get("queue_s"),
        )


class _Broken(Exception):
    """A component's records could not all be read from the agent."""


def _check(response: httpx.Response, read: bool = False) -> None:
    if response.status_code == 200:
        return
    if read:
        response.read()
    try:
        message = response.json().get("error", "")
    except ValueError:
        message = response.text[:200]
    raise AgentError(f"HTTP {response.status_code}: {message}")


def _ndjson(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.strip():  # blank lines keep the stream alive while the agent reads
            item = json.loads(line)
            if not isinstance(item, dict):
                raise ValueError("expected one JSON object a line")
            yield item


def _counts(name: str, data: dict[str, Any]) -> FileCounts:
    return FileCounts(
        component=name,
        path=str(data["path"]),
        lines=int(data["lines"]),
        matched=int(data["matched"]),
        other_run=int(data["other_run"]),
        untagged=int(data["untagged"]),
        unparseable=int(data["unparseable"]),
        unparseable_lines=[int(n) for n in data.get("unparseable_lines", [])],
        missing=data.get("missing") is True,
    )


def _describe(error: Exception) -> str:
    text = str(error) or type(error).__name__
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect ({text})"
    if isinstance(error, httpx.TimeoutException):
        return f"timed out ({type(error).__name__})"
    if isinstance(error, httpx.RemoteProtocolError):
        return f"connection broken ({text})"
    return text
