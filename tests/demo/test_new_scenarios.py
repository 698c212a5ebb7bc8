"""Each builder of the seeded stacks starts for real, answers its request and writes a
plan that parses."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from stack_helpers import fetch

from pinchpoint.demo import NginxNotFound, StackError, find_nginx
from pinchpoint.demo.haproxy import find_haproxy
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab import scenarios

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


def haproxy_present() -> bool:
    try:
        find_haproxy()
    except StackError:
        return False
    return True


BUILDERS: list[tuple[Callable[..., Any], dict[str, Any], list[str]]] = [
    (scenarios.gthread_pool, {"threads": 3}, ["nginx", "gunicorn", "app"]),
    (scenarios.uvicorn_loop, {}, ["nginx", "gunicorn", "app"]),
    (scenarios.haproxy_queue, {"workers": 2}, ["haproxy", "gunicorn", "app"]),
    (scenarios.nginx_chain, {}, ["edge", "nginx", "gunicorn", "app"]),
    (scenarios.nginx_static, {}, ["nginx", "gunicorn", "app"]),
    (scenarios.disk_fsync, {"workers": 2, "n": 1}, ["nginx", "gunicorn", "app"]),
    (scenarios.noisy_neighbour, {"cores": 0.5, "workers": 2}, ["nginx", "gunicorn", "app"]),
    (scenarios.starved_load, {"hogs": 1, "workers": 2}, ["nginx", "gunicorn", "app"]),
]


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("builder", "kwargs", "names"), BUILDERS, ids=[b.__name__ for b, _, _ in BUILDERS]
)
def test_builder_starts_answers_and_plans(
    tmp_path: Path, builder: Callable[..., Any], kwargs: dict[str, Any], names: list[str]
) -> None:
    if "haproxy" in names and not haproxy_present():
        pytest.skip("HAProxy is not installed")
    affinity = os.sched_getaffinity(0)
    with builder(tmp_path, **kwargs) as scenario:
        status, _ = fetch(scenario.url + scenario.path, method=scenario.method)
        plan = parse_plan(scenario.plan(users=(1, 2, 1), duration_s=1))
        hogs = scenario.notes.get("hog_pids", [])
        assert all(psutil.pid_exists(pid) for pid in hogs)
    assert status == 200
    assert [c.name for c in plan.component] == names
    assert os.sched_getaffinity(0) == affinity
    procs = [psutil.Process(pid) for pid in hogs if psutil.pid_exists(pid)]
    psutil.wait_procs(procs, timeout=5)
    assert not any(proc.is_running() for proc in procs)
