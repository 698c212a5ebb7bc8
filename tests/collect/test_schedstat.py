"""The time a component's threads waited for a CPU, from the scheduler's own counters."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.collect.resources.schedstat import run_delay_s

# Measures the CPU and the wait for a core of spinners: alone, after the rest (beside the
# timed tests, at the parallel lane's lowest priority, their sum fell to 2.44 of 3 cores).
pytestmark = pytest.mark.serial

SPIN = "import time\nend = time.time() + 20\nwhile time.time() < end: pass\n"


def _spinners(n: int, core: int) -> list[subprocess.Popen[bytes]]:
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]
    for proc in procs:
        os.sched_setaffinity(proc.pid, {core})
    return procs


def _mean(rows: list[dict], component: str, column: str) -> float:
    values = [r[column] for r in rows if r["component"] == component and r[column] is not None]
    assert values, f"no {column} for {component}"
    return sum(values) / len(values)


@pytest.mark.skipif(run_delay_s(os.getpid()) is None, reason="the kernel keeps no schedstat")
def test_three_spinners_on_one_core_wait_two_cores_worth() -> None:
    # Three always-runnable processes on one core: one runs, two wait, at every moment.
    core = sorted(os.sched_getaffinity(0))[-1]
    procs = _spinners(3, core)
    try:
        selector = ProcessSelector(pids=tuple(p.pid for p in procs))
        with ResourceSampler({"spin": selector}, interval_s=0.2) as sampler:
            time.sleep(1.5)
        rows = sampler.rows()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    # Always runnable: at every moment each spinner runs or waits, so the two add up to
    # three whatever else the core runs; at most one runs on the one core.
    cpu, wait = _mean(rows, "spin", "cpu_cores"), _mean(rows, "spin", "cpu_wait_cores")
    assert cpu + wait == pytest.approx(3.0, abs=0.35)
    assert cpu <= 1.1
    assert wait >= 1.8


def test_a_sleeping_process_waits_for_no_cpu() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(20)"])
    try:
        with ResourceSampler({"idle": ProcessSelector(pids=(proc.pid,))}, interval_s=0.2) as s:
            time.sleep(0.8)
        rows = s.rows()
    finally:
        proc.kill()
        proc.wait()
    assert _mean(rows, "idle", "cpu_wait_cores") < 0.05


def test_a_gone_process_has_no_run_delay() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert run_delay_s(proc.pid) is None
