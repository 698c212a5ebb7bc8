"""A run against a dead server has no latencies in its verdict: the steps' percentiles are
those of answered requests only, so they are null (the time the connections took to be
refused is the errors' own latency), and the verdict says there were no responses."""

from __future__ import annotations

import socket
from pathlib import Path

from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_server_has_no_latency_percentiles(tmp_path: Path) -> None:
    text = (
        f'[target]\nurl = "http://127.0.0.1:{dead_port()}"\n'
        '[load]\nlower = 1\nupper = 3\nstep = 2\nduration = "0.5s"\nwarmup = "0s"\n'
        '[[request]]\npath = "/"\n'
    )
    outcome = execute(parse_plan(text), text, tmp_path / "runs")
    steps = outcome.verdict["steps"]
    assert len(steps) == 2
    for step in steps:
        assert step["errors"] == step["requests"] > 0
        assert set(step["latency_ms"].values()) == {None}
        assert step["latency_mean_ms"] is None
        assert step["error_latency_p50_ms"] is not None  # the errors keep their own time
    assert outcome.verdict["bottleneck"] is None
    assert "responses" in outcome.verdict["headline"]
    assert outcome.verdict["error_reasons"]["connect_refused"][0].startswith("Connection refused")
