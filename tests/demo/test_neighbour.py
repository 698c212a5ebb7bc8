"""Noisy neighbours, for real: CPU hogs beside the stack, a starved load generator."""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from pinchpoint_lab.neighbour import CpuHog, starved_generator

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = pytest.mark.serial


def cpu_seconds(procs: list[psutil.Process]) -> float:
    return sum(sum(proc.cpu_times()[:2]) for proc in procs)


def assert_all_gone(pids: list[int]) -> None:
    procs = [psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)]
    psutil.wait_procs(procs, timeout=5)
    assert [proc.pid for proc in procs if proc.is_running()] == []


def test_a_fraction_of_a_core_is_one_duty_cycled_process() -> None:
    assert CpuHog(1.5).duties == [1.0, 0.5]
    assert CpuHog(2).duties == [1.0, 1.0]
    assert CpuHog(0.25).duties == [0.25]
    with pytest.raises(ValueError, match="cores"):
        CpuHog(0)


@pytest.mark.timeout(60)
def test_a_hog_burns_about_the_cores_asked_and_stops_on_exit() -> None:
    with CpuHog(0.5, max_seconds=30) as hog:
        pids = hog.pids
        procs = [psutil.Process(pid) for pid in pids]
        time.sleep(0.3)  # the interpreter's start is not the hog's duty cycle
        before, started = cpu_seconds(procs), time.monotonic()
        time.sleep(1.5)
        cores = (cpu_seconds(procs) - before) / (time.monotonic() - started)
    assert len(pids) == 1
    assert hog.pids == []
    assert_all_gone(pids)
    # Half a core asked; the machine is shared, so only roughly.
    assert 0.25 < cores < 0.7, cores


@pytest.mark.timeout(60)
def test_a_hog_stops_by_itself_after_max_seconds() -> None:
    with CpuHog(1.0, max_seconds=0.5) as hog:
        proc = psutil.Process(hog.pids[0])
        deadline = time.monotonic() + 10
        while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.status() == psutil.STATUS_ZOMBIE  # exited, not yet reaped
    assert_all_gone([proc.pid])


@pytest.mark.timeout(60)
def test_a_starved_generator_shares_one_core_with_its_hogs() -> None:
    original = os.sched_getaffinity(0)
    core = min(original)
    seen: dict[str, set[int]] = {}
    with starved_generator(core=core, hogs=2) as hogs:
        assert hogs is not None
        pids = hogs.pids
        seen["main"] = os.sched_getaffinity(0)
        thread = threading.Thread(target=lambda: seen.update(thread=os.sched_getaffinity(0)))
        thread.start()
        thread.join()
        time.sleep(0.3)  # each hog pins itself as it starts
        seen["hogs"] = set().union(*(psutil.Process(pid).cpu_affinity() for pid in pids))
    assert seen == {"main": {core}, "thread": {core}, "hogs": {core}}
    assert len(pids) == 2
    assert os.sched_getaffinity(0) == original
    assert_all_gone(pids)
