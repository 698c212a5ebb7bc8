"""A real grpcio server that fails every tenth call on purpose (UNAVAILABLE), loaded with
unary calls and three-message streams: the calls' 10% of errors shows as 10%, apart from
the streamed messages that would dilute it to about 4%, in the `--out` lines, on
`/metrics`, in `pinchpoint load`'s summary, in the SLA's verdict and in its abort."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import polars as pl
import pytest
from grpc_helpers import shop

from pinchpoint.api import Run
from pinchpoint.rundir import files
from pinchpoint_cli import pinchpoint, run_scraped_at_its_end

# Counts calls against a server that sleeps 20 ms a message: with the timed tests.
pytestmark = pytest.mark.timed

EVERY = 10
KIND_SAMPLE = re.compile(
    r'^(?P<name>pinchpoint_kind_\w+)\{run_id="[^"]*",kind="(?P<kind>\w+)"\} (?P<n>\S+)$'
)

PLAN = """
[target]
url = "http://127.0.0.1:PORT"
http = "2"

[load]
users = 4
duration = "DURATION"
warmup = "0s"

[[request]]
grpc = "test.Shop/Echo"
proto = "PROTO"
data = { id = "a" }

[[request]]
grpc = "test.Shop/Count"
proto = "PROTO"
data = { id = "b", n = 3 }
"""


class FailEvery(grpc.ServerInterceptor):
    """Answers every EVERY-th call of the Shop service UNAVAILABLE at once; counts them."""

    def __init__(self) -> None:
        self.calls = 0
        self.failed = 0
        self.lock = threading.Lock()

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = continuation(details)
        if not str(details.method).startswith("/test.Shop/"):  # server reflection
            return handler
        with self.lock:
            self.calls += 1
            fail = self.calls % EVERY == 0
            self.failed += fail
        if not fail:
            return handler

        def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAVAILABLE, "failed on purpose")

        make = (
            grpc.unary_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        return make(
            refuse,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


@dataclass
class Failing:
    port: int
    proto: Path
    interceptor: FailEvery


@pytest.fixture
def failing(tmp_path: Path) -> Iterator[Failing]:
    interceptor = FailEvery()
    (tmp_path / "grpc").mkdir()
    with shop(tmp_path / "grpc", interceptors=[interceptor]) as s:
        yield Failing(s.port, s.proto, interceptor)


def _plan(at: Path, server: Failing, duration: str, sla: str) -> Path:
    text = PLAN.replace("PORT", str(server.port)).replace("PROTO", str(server.proto))
    at.write_text(text.replace("DURATION", duration) + sla)
    return at


def _kind_samples(text: str) -> dict[tuple[str, str], int]:
    found = {}
    for line in text.splitlines():
        if m := KIND_SAMPLE.match(line):
            found[(m["name"], m["kind"])] = int(float(m["n"]))
    return found


def test_a_tenth_of_calls_failing_is_10_percent_in_out_metrics_and_the_sla(
    failing: Failing, tmp_path: Path
) -> None:
    # Over calls and messages together the run's errors would be about 4%: under 5%.
    _plan(tmp_path / "plan.toml", failing, "2s", "\n[sla]\nerror_rate = 0.05\n")
    returncode, stderr, scraped = run_scraped_at_its_end(tmp_path, "--out", "s.jsonl")
    assert returncode == 1, stderr  # the SLA broke
    [run_dir] = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / files.RUN).read_text())
    assert meta["endpoint_kinds"] == ["grpc_call", "grpc_call", "grpc_message"]
    records = pl.read_parquet(run_dir / files.REQUESTS)
    calls = records.filter(pl.col("endpoint") < 2)
    messages = records.filter(pl.col("endpoint") == 2)
    server = failing.interceptor
    # Every call the server saw ended before the run did, and was recorded.
    assert calls.height == server.calls and server.calls >= 100, server.calls
    assert calls["error"].drop_nulls().to_list() == ["grpc_unavailable"] * server.failed
    assert messages["error"].null_count() == messages.height > server.calls
    diluted = server.failed / records.height
    print(
        f"\n{server.calls} calls, {server.failed} failed; {messages.height} messages: {diluted:.1%}"
    )
    assert diluted < 0.05

    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    out = {
        kind: [
            sum(x["kinds"].get(kind, {}).get(k, 0) for x in lines) for k in ("requests", "errors")
        ]
        for kind in ("grpc_call", "grpc_message")
    }
    assert out == {"grpc_call": [server.calls, server.failed], "grpc_message": [messages.height, 0]}
    assert all(set(x["kinds"]) <= {"grpc_call", "grpc_message"} for x in lines)

    assert _kind_samples(scraped) == {
        ("pinchpoint_kind_requests_total", "grpc_call"): server.calls,
        ("pinchpoint_kind_errors_total", "grpc_call"): server.failed,
        ("pinchpoint_kind_requests_total", "grpc_message"): messages.height,
        ("pinchpoint_kind_errors_total", "grpc_message"): 0,
    }

    [result] = Run(run_dir).check_sla()
    assert (result.key, result.passed) == ("error_rate", False)
    assert result.objective == "errors ≤ 5% of gRPC calls"
    assert result.value is not None and abs(result.value - 1 / EVERY) < 0.02, result.value
    # Each kind apart, as `pinchpoint sla --plan` would judge another plan's objectives.
    by_kind = Run(run_dir).check_sla({"error_rate": {"grpc_call": 0.12, "grpc_message": 0.0}})
    values = {r.key: (r.passed, r.value) for r in by_kind}
    assert values["error_rate.grpc_message"] == (True, 0.0)
    assert values["error_rate.grpc_call"][0] is True
    assert abs((values["error_rate.grpc_call"][1] or 0) - 1 / EVERY) < 0.02


def test_the_abort_and_the_load_summary_see_the_calls_10_percent(
    failing: Failing, tmp_path: Path
) -> None:
    plan = _plan(
        tmp_path / "plan.toml", failing, "20s", "\n[sla]\nerror_rate = 0.05\nabort = true\n"
    )
    done = pinchpoint(tmp_path, "load", str(plan), "--out", "kept", timeout=60)
    assert done.returncode == 4, done.stderr  # aborted in its first second
    server = failing.interceptor
    summary = json.loads((tmp_path / "kept" / "summary.json").read_text())
    said = re.search(
        r"error_rate broke .*in step 0 \(4 users\): error_rate was ([\d.]+)", summary["aborted"]
    )
    assert said is not None, summary["aborted"]
    assert 0.05 < float(said[1]) < 0.15, summary["aborted"]
    assert summary["duration_s"] < 5
    calls, messages = summary["kinds"]["grpc_call"], summary["kinds"]["grpc_message"]
    assert (calls["requests"], calls["failed"]) == (server.calls, server.failed)
    assert abs(calls["error_rate"] - 1 / EVERY) < 0.011
    assert messages["failed"] == 0 and messages["requests"] >= server.calls
    assert set(summary["kinds"]) == {"grpc_call", "grpc_message"}
    row = next(line for line in done.stdout.splitlines() if "gRPC calls" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    rate = f"{100 * server.failed / server.calls:.2f}%"
    assert cells[:4] == ["gRPC calls", f"{server.calls:,}", f"{server.failed:,}", rate], row
