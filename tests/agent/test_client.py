"""The client side: RemoteCollector against a real agent."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from agent_helpers import (
    TOKEN_ENV,
    agent_thread,
    append,
    client,
    config_text,
    probe_line,
    read_logs,
)

from pinchpoint.agent import server as agent_server
from pinchpoint.collect.logs.reader import TierRow
from pinchpoint.collect.sources import local
from pinchpoint.collect.sources.remote import RemoteCollector
from pinchpoint.plan.model import Agent, Component


def test_the_client_gets_rows_counts_and_resources(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    log.write_text(probe_line("r0", 1, 1))
    component = {
        "name": "app",
        "log": {"path": str(log), "format": "probe"},
        "process": {"pids": [1]},
    }
    with agent_thread(config_text([component])) as server:
        remote = RemoteCollector(
            Agent(name="b", url=server.url, token_env=TOKEN_ENV), [Component(name="app", host="b")]
        )
        remote.start("cl-1", 0.1)
        log.write_text(
            log.read_text() + "".join(probe_line("cl-1", 4, n) for n in range(1, 6)) + "garbage\n"
        )
        # Two samples of the agent's own (three rows each) before the stop, however late
        # its sampling thread runs; the stop takes one more.
        sampled = server.runs.get("cl-1").collector
        deadline = time.monotonic() + 10
        while sampled.resources().num_rows < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        remote.stop()
        table = remote.resources()
        got: list[TierRow] = []
        counts = remote.collect_logs(got.extend)
        remote.close()
    assert remote.problems == []
    assert sorted(r.req_id for r in got) == [1, 2, 3, 4, 5]
    assert {r.component for r in got} == {"app"}
    assert [(c.component, c.matched, c.unparseable) for c in counts] == [("app", 5, 1)]
    assert {"app", "host@b", "agent@b"} == set(table.column("component").to_pylist())
    assert table.num_rows >= 6
    report = remote.report()
    assert report["status"] == "ok" and report["components"] == ["app"]


def test_a_long_read_without_matches_keeps_the_stream_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "TICK_LINES", 100)
    monkeypatch.setattr(agent_server, "KEEPALIVE_S", 0.0)
    log = tmp_path / "probe.log"
    component = {"name": "app", "log": {"path": str(log), "format": "probe"}}
    with agent_thread(config_text([component])) as server, client(server) as http:
        http.post("/v1/runs/ka-1/start")
        append(log, "".join(probe_line("other", 1, n) for n in range(1000)))
        append(log, probe_line("ka-1", 1, 1))
        with http.stream("GET", "/v1/runs/ka-1/logs/app") as response:
            raw = response.read().decode()
        rows, end = read_logs(http, "ka-1", "app")
    assert raw.count("\n\n") >= 5  # blank keepalive lines while nothing matched
    assert [r["req_id"] for r in rows] == [1]
    assert end["files"][0]["other_run"] == 1000


class _SkewedClock:
    """The agent's view of time: 100 s ahead of this host."""

    def time(self) -> float:
        return time.time() + 100.0

    def monotonic(self) -> float:
        return time.monotonic()


def test_an_agent_clock_far_off_is_moved_onto_this_hosts_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_server, "time", _SkewedClock())
    log = tmp_path / "probe.log"
    component = {"name": "app", "log": {"path": str(log), "format": "probe"}}
    with agent_thread(config_text([component])) as server:
        remote = RemoteCollector(
            Agent(name="b", url=server.url, token_env=TOKEN_ENV), [Component(name="app", host="b")]
        )
        remote.start("sk-1", 0.1)
        append(log, probe_line("sk-1", 1, 1, ts=time.time() + 100.0))
        time.sleep(0.25)
        remote.stop()
        table = remote.resources()
        rows: list[TierRow] = []
        remote.collect_logs(rows.extend)
    assert remote.report()["clock_offset_s"] == pytest.approx(100.0, abs=1.0)
    assert rows[0].ts == pytest.approx(time.time(), abs=5.0)
    # The sampler here uses this host's clock: moved back by the offset, it is 100 s early.
    assert max(table.column("ts").to_pylist()) == pytest.approx(time.time() - 100.0, abs=5.0)
