"""The plan's [sla]: each kind of objective met and broken on a run folder built for it,
over the whole run and at each step, and the exit codes of `pinchpoint sla` and `run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from pinchpoint.analyze import analyze
from pinchpoint.analyze.sla import SlaResult, check_sla
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.plan.sla import Sla, sla_of_plan_text
from pinchpoint.report.sla_table import render_sla

T0 = 1_800_000_000.0
STEP_S = 2.0
WARMUP_S = 0.5
PLAN = """\
[target]
url = "http://127.0.0.1:{port}"

[load]
lower = 1
upper = 1
duration = "1s"
warmup = "0.2s"

[[request]]
path = "/ok"
"""

# (latency ms, HTTP status, engine error) and how many of each, per step.
Requests = list[tuple[float, int, str | None, int]]
# Step 1 (4 users) is the one that breaks: 2% of its responses take 100 ms, and 1% of its
# requests fail. Over the whole run both shares are half as large.
STEPS: list[tuple[int, Requests]] = [
    (2, [(10.0, 200, None, 1000)]),
    (
        4,
        [
            (10.0, 200, None, 970),
            (100.0, 200, None, 20),
            (1.0, 503, None, 5),
            (1000.0, 0, "timeout", 5),
        ],
    ),
]
# Sent during each step's warm-up: left out, or every latency objective would break.
WARMUP_REQUESTS = (5000.0, 200, None, 50)


def write_run(
    run_dir: Path,
    steps: list[tuple[int, Requests]] = STEPS,
    sla: str = "",
    windows: bool = True,
) -> Path:
    """A run folder: requests.parquet, run.json with the step windows and warm-up, plan.toml."""
    run_dir.mkdir(parents=True)
    rows: dict[str, list[Any]] = {k: [] for k in ("step", "users", "start", "lat", "st", "err")}
    for i, (users, groups) in enumerate(steps):
        start = T0 + i * STEP_S
        spans = [
            (start, start + WARMUP_S, [WARMUP_REQUESTS]),
            (start + WARMUP_S, start + STEP_S, groups),
        ]
        for lo, hi, kinds in spans:
            n = sum(count for *_rest, count in kinds)
            sent = np.linspace(lo, hi, n, endpoint=False)
            k = 0
            for latency, status, error, count in kinds:
                for _ in range(count):
                    rows["step"].append(i)
                    rows["users"].append(users)
                    rows["start"].append(int(sent[k] * 1e6))
                    rows["lat"].append(int(latency * 1000))
                    rows["st"].append(status)
                    rows["err"].append(error)
                    k += 1
    table = pa.table(
        {
            "req_id": pa.array(range(1, len(rows["step"]) + 1), pa.uint64()),
            "step": pa.array(rows["step"], pa.uint32()),
            "users": pa.array(rows["users"], pa.uint32()),
            "start_us": pa.array(rows["start"], pa.int64()),
            "latency_us": pa.array(rows["lat"], pa.int64()),
            "status": pa.array(rows["st"], pa.uint16()),
            "error": pa.array(rows["err"], pa.string()),
            "bytes": pa.array([2] * len(rows["step"]), pa.uint64()),
        }
    )
    pq.write_table(table, run_dir / "requests.parquet")
    run: dict[str, Any] = {"run_id": run_dir.name, "started": T0, "warmup_s": WARMUP_S}
    if windows:
        run["steps"] = [
            {"step": i, "users": users, "start": T0 + i * STEP_S, "end": T0 + (i + 1) * STEP_S}
            for i, (users, _groups) in enumerate(steps)
        ]
    (run_dir / "run.json").write_text(json.dumps(run))
    (run_dir / "plan.toml").write_text(PLAN.format(port=8080) + sla)
    return run_dir


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run-1")


def only(results: list[SlaResult]) -> SlaResult:
    assert len(results) == 1
    return results[0]


@pytest.mark.parametrize(
    ("objectives", "broken_at"),
    [
        ({"p99_ms": 150}, []),
        ({"p99_ms": 50}, [4]),  # over the whole run p99 is 19.9 ms: step 4 breaks it alone
        ({"p50_ms": 11}, []),
        ({"p50_ms": 9}, [2, 4]),
        ({"p99.9_ms": 101}, []),
        ({"p99.9_ms": 99}, [4]),
        ({"error_rate": 0.02}, []),
        ({"error_rate": 0.01}, []),  # exactly 1% at 4 users: at the limit is within it
        ({"error_rate": 0.005}, [4]),
        ({"slow_ms": 50, "slow_share": 0.03}, []),
        ({"slow_ms": 50, "slow_share": 0.001}, [4]),
        ({"slow_ms": 5, "slow_share": 0.5}, [2, 4]),
    ],
)
def test_each_objective_is_met_or_broken_at_the_steps_that_break_it(
    run_dir: Path, objectives: dict[str, float], broken_at: list[int]
) -> None:
    result = only(check_sla(objectives, run_dir))
    assert [s.users for s in result.broken_steps] == broken_at
    assert result.passed is (broken_at == [])
    assert [s.users for s in result.steps] == [2, 4]


def test_values_over_the_run_and_per_step(run_dir: Path) -> None:
    sla = Sla.model_validate(
        {"p99_ms": 50, "error_rate": 0.005, "slow_ms": 50, "slow_share": 0.001}
    )
    p99, errors, slow = check_sla(sla, run_dir)
    assert p99.key == "p99_ms" and p99.objective == "p99 ≤ 50 ms"
    assert p99.value == pytest.approx(19.9)  # 1,990 responses, the slowest 20 at 100 ms
    assert p99.requests == 1990
    assert [s.value for s in p99.steps] == pytest.approx([10.0, 100.0])
    assert p99.message() == (
        "p99 ≤ 50 ms: BROKEN — 19.9 ms over the run; broken at 4 users (100 ms)"
    )
    assert errors.value == pytest.approx(10 / 2000)
    assert [s.value for s in errors.steps] == pytest.approx([0.0, 0.01])
    assert errors.requests == 2000  # failures count here, and only here
    assert slow.value == pytest.approx(20 / 1990)
    assert [s.value for s in slow.steps] == pytest.approx([0.0, 20 / 990])
    assert "broken at 4 users (2.02%)" in slow.message()


def test_warm_up_requests_are_left_out_unless_the_run_has_no_step_windows(tmp_path: Path) -> None:
    assert check_sla({"p99_ms": 150}, write_run(tmp_path / "a"))[0].passed
    # Without step windows every request counts, the slow warm-up ones too.
    result = only(check_sla({"p99_ms": 150}, write_run(tmp_path / "b", windows=False)))
    assert [s.users for s in result.broken_steps] == [2, 4]
    assert result.steps[0].value == pytest.approx(5000.0)


def test_a_step_whose_every_request_failed_breaks_latency_objectives(tmp_path: Path) -> None:
    steps = [*STEPS, (8, [(1000.0, 0, "timeout", 100)])]
    run_dir = write_run(tmp_path / "run", steps)
    p99, errors = check_sla({"p99_ms": 150, "error_rate": 0.5}, run_dir)
    assert [s.users for s in p99.broken_steps] == [8]
    assert p99.steps[2].value is None
    assert "broken at 8 users (no successful response)" in p99.message()
    assert [s.users for s in errors.broken_steps] == [8]
    assert errors.steps[2].value == 1.0


def test_results_as_json_and_in_the_terminal(run_dir: Path) -> None:
    results = check_sla({"p99_ms": 50, "error_rate": 0.02}, run_dir)
    document = json.loads(json.dumps([r.to_dict() for r in results]))
    assert document[0]["passed"] is False
    assert document[0]["broken_at_users"] == [4]
    assert document[0]["steps"][1] == {
        "step": 1,
        "users": 4,
        "requests": 990,
        "value": 100.0,
        "passed": False,
    }
    assert document[1]["passed"] is True
    console = Console(record=True, width=160)
    render_sla(results, console)
    text = console.export_text()
    assert "p99 ≤ 50 ms" in text
    assert "100 ms at 4 users" in text
    assert "BROKEN" in text
    assert "SLA broken" in text


def test_a_folder_that_keeps_no_kinds_judges_a_bare_rate_on_all_and_refuses_a_kind(
    run_dir: Path,
) -> None:
    # Written before the kinds were kept: no endpoint_kinds in run.json.
    assert "endpoint_kinds" not in json.loads((run_dir / "run.json").read_text())
    bare = only(check_sla({"error_rate": 0.05}, run_dir))
    assert bare.objective == "errors ≤ 5% of requests" and bare.value == pytest.approx(0.005)
    with pytest.raises(ValueError, match=r"^error_rate\.request: run\.json does not say each"):
        check_sla({"error_rate": {"request": 0.05}}, run_dir)


def test_no_objectives_no_results(run_dir: Path) -> None:
    assert check_sla(None, run_dir) == []


def test_plan_with_an_sla_table() -> None:
    plan = parse_plan(
        PLAN.format(port=8080)
        + '\n[sla]\np50_ms = 5\np99_ms = 50\n"p99.9_ms" = 80\nerror_rate = 0.01\n'
        + "slow_ms = 20\nslow_share = 0.001\n"
    )
    assert plan.sla is not None
    assert plan.sla.percentiles() == [
        ("p50_ms", 50.0, 5.0),
        ("p99_ms", 99.0, 50.0),
        ("p99.9_ms", 99.9, 80.0),
    ]
    assert (plan.sla.error_rate, plan.sla.slow_ms, plan.sla.slow_share) == (0.01, 20.0, 0.001)
    assert parse_plan(PLAN.format(port=8080)).sla is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("p99_ms = -1", "plan.toml:14: sla.p99_ms: Input should be greater than 0"),
        ("error_rate = 0.01\np99ms = 5", "plan.toml:15: sla.p99ms: unknown SLA key 'p99ms'"),
        ("p100_ms = 5", "plan.toml:14: sla.p100_ms: unknown SLA key"),
        ("p0_ms = 5", "plan.toml:14: sla.p0_ms: the percentile must be above 0 and below 100"),
        ("p99.9_ms = 5", 'plan.toml:13: sla.p99: write "p99.9_ms" in quotes'),  # the [sla] line
        ("error_rate = 1.5", "plan.toml:14: sla.error_rate: 1.5 is not a share from 0 to 1"),
        (
            "error_rate = { calls = 0.1 }",
            "plan.toml:14: sla.error_rate.calls: unknown kind 'calls'; the kinds: request, "
            "ws_session, ws_message, grpc_call, grpc_message",
        ),
        (
            'error_rate = { grpc_call = "1%" }',
            "plan.toml:14: sla.error_rate.grpc_call: '1%' is not a share from 0 to 1",
        ),
        ("error_rate = {}", "plan.toml:14: sla.error_rate: name at least one kind: request"),
        (
            'error_rate = { request = 0.1 }\nabort = ["error_rate"]',
            "plan.toml:15: sla.abort: 'error_rate' is not an objective of this [sla]; "
            "its objectives: error_rate.request",
        ),
        ("slow_ms = 20", "plan.toml:14: sla.slow_ms: slow_ms and slow_share go together"),
        ("slow_share = 0.1", "plan.toml:14: sla.slow_share: slow_ms and slow_share go together"),
    ],
)
def test_bad_sla_tables_name_the_line_and_key(table: str, message: str) -> None:
    text = PLAN.format(port=8080) + f"\n[sla]\n{table}\n"
    with pytest.raises(PlanError, match="^" + re.escape(message)):
        parse_plan(text, "plan.toml")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        sla_of_plan_text(text, "plan.toml")


def test_an_error_rate_of_a_kind_the_plan_does_not_send_is_refused_before_the_run() -> None:
    # It would be judged on no records at all.
    text = PLAN.format(port=8080) + "\n[sla]\nerror_rate = { grpc_call = 0.01 }\n"
    with pytest.raises(PlanError) as refused:
        parse_plan(text, "plan.toml")
    assert str(refused.value) == (
        "plan.toml:14: sla.error_rate.grpc_call: this plan sends no grpc_call records: "
        "its records are request"
    )
    sla = parse_plan(text.replace("grpc_call", "request"), "plan.toml").sla
    assert sla is not None
    assert sla.error_rates() == [("error_rate.request", "request", 0.01)]
    assert sla.objective_keys() == ["error_rate.request"]


# The command line.


def cli(
    *args: str, cwd: Path | None = None, columns: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)} if columns else None
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env=env,
    )


def analyzed(run_dir: Path) -> Path:
    """The folder with its verdict, which keeps the SLA the analysis checked."""
    analyze(run_dir)
    return run_dir


def test_sla_command_exits_1_when_broken_and_0_when_met(tmp_path: Path) -> None:
    broken = analyzed(
        write_run(tmp_path / "broken", sla="\n[sla]\np99_ms = 50\nerror_rate = 0.02\n")
    )
    done = cli("sla", str(broken))
    assert done.returncode == 1, done.stderr
    assert "BROKEN" in done.stdout
    assert "p99 ≤ 50 ms: BROKEN — 19.9 ms over the run; broken at 4 users (100 ms)" in " ".join(
        done.stdout.split()
    )

    met = analyzed(write_run(tmp_path / "met", sla="\n[sla]\np99_ms = 150\nerror_rate = 0.02\n"))
    done = cli("sla", str(met), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["sla"]["passed"] is True
    assert [r["key"] for r in document["sla"]["results"]] == ["p99_ms", "error_rate"]

    # Other thresholds for the same run, from another plan.
    other = tmp_path / "other.toml"
    other.write_text("[sla]\nslow_ms = 50\nslow_share = 0.001\n")
    done = cli("sla", str(met), "--plan", str(other), "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["sla"]["results"][0]["broken_at_users"] == [4]


def test_sla_command_without_objectives_is_a_usage_error(run_dir: Path) -> None:
    analyze(run_dir)
    # A narrow terminal must not break the message (and its file name) across lines.
    done = cli("sla", str(run_dir), columns=30)
    assert done.returncode == 2
    assert f"{run_dir / 'plan.toml'}: no [sla] table to check" in done.stderr


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize(("p50_ms", "code"), [(0.001, 1), (60_000, 0)])
def test_run_exits_1_on_a_broken_sla_after_writing_everything(
    server: int, tmp_path: Path, p50_ms: float, code: int
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(port=server) + f"\n[sla]\np50_ms = {p50_ms}\nerror_rate = 0\n")
    runs = tmp_path / "runs"
    done = cli("run", str(plan), "--runs-dir", str(runs), "--json", "--quiet", cwd=tmp_path)
    assert done.returncode == code, done.stderr
    document = json.loads(done.stdout)
    run_dir = Path(document["run_dir"])
    assert run_dir.parent == runs
    for name in ("requests.parquet", "verdict.json", "report.html"):
        assert (run_dir / name).is_file()
    assert document["verdict"]["run_id"] == run_dir.name
    assert document["sla"]["passed"] is (code == 0)
    p50, errors = document["sla"]["results"]
    assert (p50["key"], p50["passed"], errors["passed"]) == ("p50_ms", code == 0, True)
    assert ("BROKEN" in done.stderr) is (code == 1)  # the table, beside the JSON
    # The SLA in the report too.
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert ("SLA broken" if code else "SLA met") in page
