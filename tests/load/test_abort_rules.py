"""`[[abort]]`: a metric of each second past its limit for `for_s` stops the run, judged
only from `after_s` on; the rules are checked with the plan, before any load.

The run's test loads a server on loopback that answers in 2 ms, then in 60 ms once it has
answered a few hundred requests: the p99 passes its limit in the run's first seconds, and
the run stops `for_s` after `after_s`, not before."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from ok_target import OkTarget
from pinchpoint.load.abort_rules import Previous, RuleWatch, Watches, second_metrics
from pinchpoint.load.hdr import Histogram
from pinchpoint.plan.abort import AbortRule
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_cli import pinchpoint
from pinchpoint_lab.serving import serving

PLAN = '[target]\nurl = "http://127.0.0.1:{port}"\n\n[load]\n{load}\n\n[[request]]\npath = "/"\n'


def _second(
    requests: int, errors: int, ms: list[float], step: int = 0, **more: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requests": requests,
        "errors": errors,
        "step": step,
        "users": 4,
        "kind": "users",
        "window_requests": len(ms),
        **more,
    }
    if ms:
        out["window_hdr_v2"] = Histogram.of(np.array([int(m * 1000) for m in ms])).v2()
    return out


def _watch(*rules: AbortRule, started: float = 0.0) -> RuleWatch:
    return RuleWatch(list(rules), started)


def test_a_rule_fires_once_it_held_for_for_s_and_not_before_after_s() -> None:
    watch = _watch(AbortRule(metric="p99_ms", above=40, for_s=2, after_s=3))
    slow, fast = [5.0] * 90 + [80.0] * 10, [5.0] * 100
    # Past the limit from the first second, judged from the third on.
    assert watch.observe(_second(100, 0, slow), now=1.0) is None
    assert watch.observe(_second(200, 0, slow), now=2.0) is None
    assert watch.observe(_second(300, 0, slow), now=3.0) is None  # held 1 s
    assert watch.observe(_second(400, 0, fast), now=4.0) is None  # under: starts again
    assert watch.observe(_second(500, 0, slow), now=5.0) is None
    fired = watch.observe(_second(600, 0, slow, step=1), now=6.0)
    assert fired is not None and fired.objective == "p99_ms" and fired.broken_s == 2.0
    assert fired.reason().startswith("[[abort]] p99_ms above 40 for 2 s in step 1 (4 users): ")
    assert 79 <= fired.value <= 81 and fired.reason().endswith(f"p99_ms was {fired.value:.4g}")
    # The reason counts steps as run.json, requests.parquet and the tables do: from 0.
    assert fired.as_json()["limit"] == 40 and fired.as_json()["step"] == 1
    assert watch.observe(_second(700, 0, slow), now=7.0) is None  # fires once


def test_below_a_limit_and_the_metrics_of_one_second() -> None:
    watch = _watch(AbortRule(metric="rps", below=50))
    assert watch.observe(_second(100, 0, [1.0]), now=1.0) is None  # 100 req/s
    fired = watch.observe(_second(130, 0, [1.0]), now=2.0)
    assert fired is not None and fired.value == 30.0 and "rps below 50 for 1 s" in fired.reason()
    before = Previous(requests=100, errors=10, classes={"http_5xx": 10}, at=1.0)
    snapshot = _second(
        300, 60, [2.0, 4.0], in_flight=7, send_lag_max_us=2500,
        errors_by_class={"http_5xx": 40, "http_4xx": 20},
    )  # fmt: skip
    assert second_metrics(snapshot, before, now=3.0) == {
        "users": 4.0,
        "rps": 100.0,
        "error_rate": 0.25,
        "http_4xx_rate": 0.1,
        "http_5xx_rate": 0.15,
        "in_flight": 7.0,
        "send_lag_ms": 2.5,
    }


def test_a_second_without_a_response_leaves_a_latency_rule_as_it_was() -> None:
    watch = _watch(AbortRule(metric="max_ms", above=10, for_s=2))
    assert watch.observe(_second(10, 0, [20.0]), now=1.0) is None
    assert watch.observe(_second(10, 0, []), now=2.0) is None  # nothing answered
    fired = watch.observe(_second(20, 0, [30.0]), now=3.0)
    assert fired is not None and fired.broken_s == 3.0 and 29 <= fired.value <= 31


@pytest.mark.parametrize(
    ("table", "said"),
    [
        (
            'metric = "p99"\nabove = 5',
            "plan.toml:12: abort[0].metric: unknown metric 'p99'; the metrics: rps, error_rate",
        ),
        ('metric = "p0_ms"\nabove = 5', "abort[0].metric: the percentile must be above 0"),
        ('metric = "rps"', "plan.toml:11: abort[0].above: give one limit"),
        ('metric = "rps"\nabove = 1\nbelow = 2', "abort[0].above: give one limit"),
        ('metric = "rps"\nbelow = 1\nfor_s = "soon"', "plan.toml:14: abort[0].for_s"),
        ('metric = "rps"\nbelow = 1\nafter = 3', "abort[0].after: Extra inputs"),
    ],
)
def test_a_rule_that_cannot_be_watched_is_refused_with_its_line(table: str, said: str) -> None:
    text = PLAN.format(port=9, load='users = 1\nduration = "1s"') + f"\n[[abort]]\n{table}\n"
    with pytest.raises(PlanError) as refused:
        parse_plan(text, "plan.toml")
    [line] = str(refused.value).splitlines()
    assert said in line


class _SlowsDown(OkTarget):
    """2 ms for the first SLOW_AFTER requests, 60 ms after them."""

    SLOW_AFTER = 150
    nodelay = True
    served: ClassVar[list[float]] = []
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.served.append(time.monotonic())
            n = len(self.served)
        self.answer(200, 0.002 if n <= self.SLOW_AFTER else 0.06)


FOR_S, AFTER_S = 2.0, 4.0


LOCUSTFILE = """from locust import HttpUser, constant, task


class Hit(HttpUser):
    wait_time = constant(0.005)

    @task
    def hit(self):
        self.client.get("/")
"""


@pytest.mark.timed  # judges latencies and times the stop
@pytest.mark.parametrize("users", ["engine", "locustfile"])
def test_a_run_stops_for_s_after_after_s_and_run_json_says_why(users: str, tmp_path: Path) -> None:
    _SlowsDown.served = []
    with serving(_SlowsDown) as port:
        load = 'users = 2\nduration = "20s"\nwarmup = "0s"\nthink_time = "5ms"'
        if users == "locustfile":
            (tmp_path / "hit.py").write_text(LOCUSTFILE)
            load += '\nlocustfile = "hit.py"'
        (tmp_path / "plan.toml").write_text(
            PLAN.format(port=port, load=load)
            + f'\n[[abort]]\nmetric = "p99_ms"\nabove = 40\nfor_s = {FOR_S:g}\n'
            f"after_s = {AFTER_S:g}\n"
        )
        run = ("run", "plan.toml", "-q", "--runs-dir", "runs")
        done = pinchpoint(tmp_path, *run, timeout=120, columns=300)
    assert done.returncode == 4, done.stderr + done.stdout
    [run_dir] = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    aborted = run["aborted"]
    print(f"\n{aborted['reason']}")
    assert aborted["objective"] == "p99_ms" and aborted["limit"] == 40
    assert 55 <= aborted["value"] <= 90
    assert aborted["reason"].startswith(
        f"[[abort]] p99_ms above 40 for {FOR_S:g} s in step 0 (2 users): p99_ms was "
    )
    [step] = run["steps"]
    assert step["step"] == aborted["step"] == 0 and " in step 0 (" in aborted["reason"]
    slow_from = _SlowsDown.served[_SlowsDown.SLOW_AFTER] - _SlowsDown.served[0]
    took = step["end"] - step["start"]
    print(f"slow from {slow_from:.2f} s, stopped after {took:.2f} s of the run")
    # Past the limit long before after_s: judged only from after_s on, it held for_s
    # (its first second judged counts whole), and the stop came within a second.
    assert slow_from < AFTER_S - FOR_S
    assert AFTER_S + FOR_S - 1.5 <= took <= AFTER_S + FOR_S + 1.0


def test_the_sla_s_objectives_and_the_rules_each_see_every_second() -> None:
    plan = parse_plan(
        PLAN.format(port=9, load='users = 1\nduration = "1s"')
        + '\n[sla]\nerror_rate = 0.5\nabort = true\n\n[[abort]]\nmetric = "rps"\nbelow = 50\n',
        "plan.toml",
    )
    watches = Watches.of(plan.sla, plan.abort)
    assert watches is not None and len(watches.each) == 2
    now = time.monotonic()  # the rules count after_s from the watch's making
    assert watches.observe(_second(100, 0, [1.0]), now=now + 1.0) is None
    fired = watches.observe(_second(110, 1, [1.0]), now=now + 2.0)
    assert fired is not None and fired.objective == "rps" and watches.fired is fired
    # The objectives' watch saw both seconds (the second's error rate, 1 of 10, is under).
    [sla, rules] = watches.each
    assert sla.last == {"requests": 110, "errors": 1} and rules.fired is fired
    assert Watches.of(None, []) is None
