"""Inside the Locust child (load/locust_child.py): the run's tag on every request a
locustfile's users send, and a row of requests.parquet for every request Locust reports.

The tag is the engine's: `pp_run`, `pp_users`, `pp_req` in the query, the `X-Pinchpoint`
header, and `traceparent` and `baggage` unless the request sets its own. Request ids
count up from 0. Each request's endpoint is the index of its `METHOD name` (Locust's
statistics key: the `name=` given, or the path and query as sent without the tag) in
order of first appearance.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from http.client import RemoteDisconnected
from ssl import SSLError
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import requests
from locust.exception import CatchResponseError
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError, ProtocolError

from pinchpoint.load.locust_target import (
    Address,
    OffTarget,
    fast_address,
    requests_address,
    target_address,
)
from pinchpoint.logformats.tag import HEADER, header_value, query_suffix, span_id, trace_id
from pinchpoint.rundir.schemas import REQUESTS_SCHEMA

# The request's tag (req_id, step, users) in the context Locust hands the listener.
CONTEXT_KEY = "pinchpoint"
# Distinct names kept apart; those past it share the last endpoint.
MAX_ENDPOINTS = 1000
OTHER_NAMES = "(other names)"
REASONS_PER_CLASS = 3
FLUSH_S = 0.5
FLUSH_ROWS = 8192


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception, what it wraps (`reason`, exceptions in `args`), its causes."""
    out: list[BaseException] = []
    todo = [exc]
    while todo and len(out) < 20:
        e = todo.pop(0)
        if e in out:
            continue
        out.append(e)
        todo += [a for a in (*e.args, getattr(e, "reason", None)) if isinstance(a, BaseException)]
        todo += [c for c in (e.__cause__, e.__context__) if c is not None]
    return out


_CLASSES: list[tuple[str, tuple[type[BaseException], ...]]] = [
    ("connect_refused", (ConnectionRefusedError,)),
    ("connect_timeout", (requests.ConnectTimeout, ConnectTimeoutError)),
    ("tls", (requests.exceptions.SSLError, SSLError)),
    ("reset", (ConnectionResetError,)),
    ("closed", (RemoteDisconnected, ConnectionAbortedError, BrokenPipeError)),
    ("timeout", (TimeoutError, requests.Timeout)),
    ("connect_error", (NewConnectionError, requests.ConnectionError, ProtocolError)),
]


def error_class(exc: BaseException | None, response: Any, status: int) -> str | None:
    """The engine's error class of what Locust reported; None for an answer, whatever its
    status (an HTTP error status is no error class, as in the engine)."""
    if exc is None:
        return None
    if isinstance(exc, CatchResponseError):
        failed = getattr(response, "error", None)
        if status == 0 and isinstance(failed, BaseException):
            return error_class(failed, None, 0)
        return "check"
    if isinstance(exc, requests.HTTPError) and status:
        return None
    causes = _causes(exc)
    for name, types in _CLASSES:
        if any(isinstance(c, types) for c in causes):
            return name
    return "io"


class Recorder:
    """The rows of the run, streamed to an Arrow IPC file as the engine streams its own,
    and the live counters."""

    def __init__(self, stream: str) -> None:
        self.writer = pa.ipc.new_stream(stream, REQUESTS_SCHEMA)
        # The schema written now (pyarrow writes it with the first batch): a process
        # killed before its first flush leaves a stream that reads as no rows. pyarrow
        # also imports pandas on its first conversion (a second or so): before the steps,
        # not in the middle of the first, where it would stall every user.
        empty = [pa.array([], type=f.type) for f in REQUESTS_SCHEMA]
        self.writer.write_batch(pa.record_batch(empty, schema=REQUESTS_SCHEMA))
        self.pending: list[tuple] = []
        self.ids = itertools.count()
        self.endpoints: dict[str, int] = {}
        self.reasons: dict[str, list[str]] = {}
        self.step = 0
        self.users = 0
        self.rows = 0
        self.requests = 0
        self.errors = 0
        # Errors by the engine's class, with HTTP's error statuses as http_4xx / http_5xx.
        self.classes: dict[str, int] = {}
        self.latency_sum_us = 0
        self.window: list[int] = []
        self.flushed = time.monotonic()
        self.closed = False

    def endpoint(self, key: str) -> int:
        if key not in self.endpoints:
            if len(self.endpoints) >= MAX_ENDPOINTS:
                key = OTHER_NAMES
            self.endpoints.setdefault(key, len(self.endpoints))
        return self.endpoints[key]

    def endpoint_names(self) -> list[str]:
        return list(self.endpoints)

    def on_request(
        self,
        request_type: str,
        name: str,
        response_time: float,
        response_length: int,
        response: Any = None,
        context: dict | None = None,
        exception: BaseException | None = None,
        start_time: float | None = None,
        **_: Any,
    ) -> None:
        tag = (context or {}).get(CONTEXT_KEY)
        req_id, step, users = tag if tag is not None else (next(self.ids), self.step, self.users)
        status = int(getattr(response, "status_code", 0) or 0)
        error = error_class(exception, response, status)
        latency = max(round(response_time * 1000), 0)
        start = round((start_time if start_time is not None else time.time()) * 1e6)
        self.pending.append((
            req_id, step, users, self.endpoint(f"{request_type} {name}"), start, start,
            latency, latency, status, error, max(int(response_length or 0), 0), None, None,
        ))  # fmt: skip
        self.requests += 1
        self.latency_sum_us += latency
        if error is not None or status >= 400:
            self.errors += 1
            kind = error or ("http_5xx" if status >= 500 else "http_4xx")
            self.classes[kind] = self.classes.get(kind, 0) + 1
        if error is None:
            self.window.append(latency)
        else:
            self._reason(error, f"{type(exception).__name__}: {exception}"[:300])
        if len(self.pending) >= FLUSH_ROWS:
            self.flush()

    def _reason(self, error: str, text: str) -> None:
        kept = self.reasons.setdefault(error, [])
        if len(kept) < REASONS_PER_CLASS and text not in kept:
            kept.append(text)

    def flush_due(self) -> None:
        if time.monotonic() - self.flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        # Taken at once: a stall's signal handler (close) that runs in the middle of
        # this flush writes what is still pending, never these rows a second time.
        rows, self.pending = self.pending, []
        if not rows or self.closed:
            return
        columns = zip(*rows, strict=True)
        arrays = [pa.array(c, type=f.type) for c, f in zip(columns, REQUESTS_SCHEMA, strict=True)]
        self.writer.write_batch(pa.record_batch(arrays, schema=REQUESTS_SCHEMA))
        self.rows += len(rows)

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True
            self.writer.close()

    def tick(self, step: int, users: int, level: float) -> dict:
        """The live counters, as the engine's snapshot has them, the second's latencies
        as a list (`window_us`) where the engine gives a histogram."""
        window = sorted(self.window)
        self.window = []
        out = {
            "requests": self.requests, "errors": self.errors, "step": step, "users": users,
            "kind": "users", "level": level, "late": 0, "latency_sum_us": self.latency_sum_us,
            "window_requests": len(window), "errors_by_class": dict(self.classes),
            "window_us": window,
        }  # fmt: skip
        if window:
            for q in (50, 99):
                out[f"window_p{q}_us"] = window[min(len(window) - 1, len(window) * q // 100)]
        return out


class Tagging:
    """Wraps a Locust session class's `request` so each request carries the run's tag,
    the plan's timeout and TLS settings, and goes nowhere but the target."""

    def __init__(self, config: dict, recorder: Recorder) -> None:
        self.run_id: str = config["run_id"]
        self.tag: bool = config["tag"]
        self.target = target_address(config["target"])
        self.timeout: float = config["timeout"]
        self.verify: bool | str = config["verify"]
        self.recorder = recorder
        self.off_target: str | None = None
        # The trace id's run half, worked out once a run.
        self.trace_half = trace_id(self.run_id, 0)[:16]

    def refuse(self, where: str) -> None:
        """Ends the run: the locustfile sends somewhere else than the target."""
        self.off_target = self.off_target or f"sends to {where}, off the plan's target"

    def _check(self, session: Any, url: str, asked: str) -> None:
        """The URL as sent (`asked` before its tag) connects to the target, as the
        session's own client reads it (load/locust_target.py); its connections are
        guarded too."""
        reader = requests_address if isinstance(session, requests.Session) else fast_address
        try:
            where: Address | None = reader(url)
        except Exception:  # the client cannot send it either: its own error is recorded
            where = None
        if where is not None and where != self.target:
            self.refuse(f"{asked}, which connects to {where[0]}://{where[1]}:{where[2]}")
            raise OffTarget(f"{asked}: pinchpoint sends only to the plan's target")

    def install(self, session_class: type[Any]) -> None:
        original: Callable[..., Any] = session_class.request
        tagging = self

        def request(session: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            return tagging.send(original, session, method, url, *args, **kwargs)

        session_class.request = request

    def send(
        self,
        original: Callable[..., Any],
        session: Any,
        method: str,
        url: str,
        name: str | None = None,
        catch_response: bool = False,
        context: dict | None = None,
        **kwargs: Any,
    ) -> Any:
        asked = full = session._build_url(url)
        parts = urlsplit(full)
        if name is None and not session.request_name:
            name = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        req_id, step, users = next(self.recorder.ids), self.recorder.step, self.recorder.users
        headers = dict(kwargs.pop("headers", None) or {})
        if self.tag:
            fields = query_suffix(self.run_id, users, req_id)
            query = f"{parts.query}&{fields}" if parts.query else fields
            full = urlunsplit(parts._replace(query=query))
            headers[HEADER] = header_value(self.run_id, users, req_id)
            given = {k.lower() for k in headers}
            if "traceparent" not in given:
                headers["traceparent"] = f"00-{self.trace_half}{req_id:016x}-{span_id(req_id)}-01"
            if "baggage" not in given:
                headers["baggage"] = f"pp.run={self.run_id},pp.users={users}"
        self._check(session, full, asked)
        if isinstance(session, requests.Session):
            kwargs.setdefault("timeout", self.timeout)
            kwargs.setdefault("verify", self.verify)
        context = {**(context or {}), CONTEXT_KEY: (req_id, step, users)}
        return original(
            session, method, full, name=name, catch_response=catch_response,
            context=context, headers=headers, **kwargs,
        )  # fmt: skip
