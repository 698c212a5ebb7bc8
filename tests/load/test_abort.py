"""`[sla] abort`: an objective that stops the run when it breaks, judged each second.

The stack is the demo's (nginx → gunicorn with one sync worker, each request waiting
30 ms): one user answers in about 30 ms, three wait on each other for about 90 ms, so a
p99 objective of 70 ms breaks in the second step and the run stops there, once it has
stayed broken for 2 s (a single slow second, as a cold start gives, does not stop it)."""

from __future__ import annotations

import json
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from load_helpers import serving

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.demo.plan import demo_plan
from pinchpoint.demo.stack import DemoStack
from pinchpoint.load.abort import AbortWatch
from pinchpoint.load.hdr import Histogram
from pinchpoint.plan.sla import sla_of_plan_text
from pinchpoint.rundir import files
from pinchpoint_cli import pinchpoint

ABORT_AFTER_S = 2.0
STEP_S = 6.0
SLA = f"""
[sla]
p99_ms = 70
abort = true
abort_after = "{ABORT_AFTER_S:g}s"
"""


def _second(requests: int, errors: int, latencies_ms: list[float], step: int = 0) -> dict:
    window = Histogram.of([int(ms * 1000) for ms in latencies_ms])
    return {
        "requests": requests,
        "errors": errors,
        "step": step,
        "users": 3,
        "kind": "users",
        "window_requests": len(latencies_ms),
        "window_hdr_v2": window.v2(),
    }


def _watch(text: str) -> AbortWatch:
    watch = AbortWatch.of(sla_of_plan_text(text))
    assert watch is not None
    return watch


def test_an_objective_breaks_only_once_it_stayed_broken_for_abort_after() -> None:
    watch = _watch('[sla]\np99_ms = 45\nabort = true\nabort_after = "3s"\n')
    slow, fast = [20.0] * 90 + [80.0] * 10, [20.0] * 100
    assert watch.observe(_second(100, 0, slow), now=10.0) is None
    assert watch.observe(_second(200, 0, fast), now=11.0) is None  # back under: reset
    assert watch.observe(_second(300, 0, slow), now=12.0) is None
    assert watch.observe(_second(400, 0, slow), now=13.0) is None
    fired = watch.observe(_second(500, 0, slow, step=2), now=14.0)
    assert fired is not None and fired.objective == "p99_ms" and fired.broken_s == 3.0
    assert 79 <= fired.value <= 81 and fired.step == 2
    reason = fired.reason()
    assert reason.startswith("[sla] p99_ms broke for 3 s in step 2 (3 users): p99 was 80")
    assert reason.endswith(" ms (objective 45 ms)")
    assert watch.observe(_second(600, 0, slow), now=15.0) is None  # fires once


def test_the_error_rate_and_the_slow_share_are_judged_on_each_second_alone() -> None:
    watch = _watch('[sla]\nerror_rate = 0.1\nabort = true\nabort_after = "2s"\n')
    assert watch.observe(_second(1000, 500, [10.0] * 100), now=1.0) is None  # 0.5, 1 s
    # No error in this second: its rate is 0, whatever the run's total, and it resets.
    assert watch.observe(_second(2000, 500, [10.0] * 100), now=2.0) is None
    assert watch.observe(_second(3000, 1000, [10.0] * 100), now=3.0) is None
    fired = watch.observe(_second(4000, 1500, [10.0] * 100), now=4.0)
    assert fired is not None and fired.value == 0.5 and fired.broken_s == 2.0
    watch = _watch("[sla]\nerror_rate = 0.5\nslow_ms = 50\nslow_share = 0.2\nabort = true\n")
    assert watch.observe(_second(100, 10, [10.0] * 100), now=1.0) is None
    fired = watch.observe(_second(200, 20, [10.0] * 70 + [60.0] * 30), now=2.0)
    assert fired is not None and fired.objective == "slow_ms" and fired.value == pytest.approx(0.3)
    watch = _watch('[sla]\nerror_rate = 0.05\np99_ms = 500\nabort = ["error_rate"]\n')
    assert watch.observe(_second(100, 4, [900.0] * 100), now=1.0) is None  # p99 does not abort
    fired = watch.observe(_second(200, 14, [10.0] * 100), now=2.0)
    assert fired is not None and fired.objective == "error_rate" and fired.value == 0.1


def test_a_second_without_a_response_leaves_the_objectives_as_they_were() -> None:
    watch = _watch('[sla]\np99_ms = 45\nabort = true\nabort_after = "2s"\n')
    assert watch.observe(_second(100, 0, [80.0] * 100), now=1.0) is None
    assert watch.observe({"requests": 100, "errors": 0, "window_requests": 0}, now=2.0) is None
    assert watch.observe(_second(150, 0, [80.0] * 50), now=3.0) is not None


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('p99_ms = 5\nabort = ["p95_ms"]', "sla.abort: 'p95_ms' is not an objective of this [sla]"),
        ("abort = true", "sla.abort: abort = true needs an objective to watch"),
        ('p99_ms = 5\nabort = true\nabort_after = "soon"', "sla.abort_after"),
    ],
)
def test_an_abort_that_cannot_be_watched_is_refused_with_its_line(table: str, said: str) -> None:
    with pytest.raises(ValueError, match=r"^plan\.toml:[2-4]: ") as refused:
        sla_of_plan_text(f"[sla]\n{table}\n")
    assert said in str(refused.value)


@pytest.mark.timed  # judges latencies: one at a time, beside the parallel part
def test_a_run_whose_p99_breaks_stops_keeps_every_record_and_exits_4(tmp_path: Path) -> None:
    try:
        find_nginx()
    except NginxNotFound as e:
        pytest.skip(str(e))
    with DemoStack(tmp_path / "stack", workers=1) as stack:
        plan = demo_plan(stack.url, stack.components(), 1, 7, 2, STEP_S, cpu_ms=0, wait_ms=30)
        (tmp_path / "plan.toml").write_text(plan + SLA)
        done = pinchpoint(
            tmp_path, "run", "plan.toml", "--runs-dir", "runs", timeout=120, columns=300
        )
    assert done.returncode == 4, done.stderr + done.stdout
    [run_dir] = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    aborted = run["aborted"]
    print(f"\n{aborted['reason']}")
    assert aborted["objective"] == "p99_ms" and aborted["value"] > 70 and aborted["step"] == 1
    # Two of the four steps ran; the second says why it ended early.
    steps = run["steps"]
    assert len(steps) == 2 and steps[1]["aborted"] == aborted["reason"]
    assert not run["interrupted"]
    # It stopped within abort_after and one second (the second it is judged on) of the
    # step's start, with a second more for the second judged to end.
    took = steps[1]["end"] - steps[1]["start"]
    print(f"the second step lasted {took:.2f} s of its {STEP_S:g} s")
    assert took <= ABORT_AFTER_S + 1.0 + 1.0
    # Every request it sent was answered and kept, and nginx logged each one.
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    assert requests["error"].null_count() == requests.height
    collection = json.loads((run_dir / files.COLLECTION).read_text())
    assert collection["components"]["nginx"]["matched"] == requests.height
    verdict = json.loads((run_dir / files.VERDICT).read_text())
    assert verdict["aborted"] == aborted["reason"] and len(verdict["steps"]) == 2
    assert "Aborted: [sla] p99_ms broke" in " ".join(done.stdout.split())
    assert 'id="aborted"' in (run_dir / "report.html").read_text()


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def _load(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return pinchpoint(cwd, "load", *args, timeout=60, columns=300)


def test_load_stops_at_the_first_second_past_its_error_rate_and_exits_4(tmp_path: Path) -> None:
    with serving(_Failing) as port:
        url = f"http://127.0.0.1:{port}/"
        done = _load(
            [url, "-c", "4", "-d", "8", "--abort-on-error-rate", "0.5", "--json"], tmp_path
        )
    assert done.returncode == 4, done.stderr
    summary = json.loads(done.stdout)
    assert summary["aborted"].startswith(
        "[sla] error_rate broke for 1 s in step 0 (4 users): error_rate was 1 (objective 0.5)"
    )
    assert summary["duration_s"] < 3.0 and not summary["interrupted"]
    assert summary["requests"] == summary["statuses"]["503"] > 0
    assert "Aborted: [sla] error_rate broke" in done.stderr


def test_the_abort_flag_goes_with_a_url_not_a_plan(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text('[target]\nurl = "http://127.0.0.1:9"\n[[request]]\n')
    done = _load(["plan.toml", "--abort-on-error-rate", "0.5"], tmp_path)
    assert done.returncode == 2
    assert "--abort-on-error-rate go with a URL" in done.stderr
    done = _load(["http://127.0.0.1:9/", "--abort-on-error-rate", "1.5"], tmp_path)
    assert done.returncode == 2 and "--abort-on-error-rate 1.5: must be above 0" in done.stderr
