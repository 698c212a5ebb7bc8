"""uvicorn behind nginx, as uvicorn's docs deploy it, known by its processes alone (it logs
no time): its time is nginx's upstream time. An `async def` handler that makes a blocking
call serves one request at a time; one that computes fills the host's cores; a plan that
names nothing behind nginx does not blame nginx for the time it waits."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import finding, need_module, need_nginx, run_scenario

from pinchpoint_lab import scenarios

BLOCKED = "/work?cpu=0.2&wait=10&block=1"
COMPUTING = "/work?cpu=6"
USERS = (1, 7, 2)


@pytest.mark.timed
def test_an_event_loop_a_synchronous_call_blocks_is_named_not_a_pool_of_one(
    tmp_path: Path,
) -> None:
    need_nginx()
    need_module("uvicorn", "pip install uvicorn")
    verdict = run_scenario(scenarios.asgi_loop, tmp_path, users=USERS, path=BLOCKED)
    assert finding(verdict) == ("uvicorn", "event_loop"), verdict["headline"]
    b = verdict["bottleneck"]
    assert b["starts_at_users"] == 3
    assert "Add workers" not in b["summary"] and "await the call" in b["summary"]
    evidence = "\n".join(b["evidence"])
    assert "uvicorn runs one event loop" in evidence
    top = verdict["steps"][-1]
    assert top["resources"]["uvicorn"]["pool_kind"] == "async"
    assert top["resources"]["uvicorn"]["cpu_cores"] < 0.25
    # One at a time: 10 ms each is at most 100 a second, however many users wait.
    assert 60 <= top["throughput_rps"] <= 100
    assert top["tiers"]["uvicorn"]["p50_ms"] > 5 * verdict["steps"][0]["tiers"]["uvicorn"]["p50_ms"]


@pytest.mark.timed
def test_a_plan_stopping_at_nginx_does_not_blame_nginx_for_what_it_waits_on(
    tmp_path: Path,
) -> None:
    need_nginx()
    need_module("uvicorn", "pip install uvicorn")
    verdict = run_scenario(
        scenarios.asgi_loop, tmp_path, users=USERS, path=BLOCKED, nginx_only=True
    )
    b = verdict["bottleneck"]
    assert b["component"] == "nginx-upstream", verdict["headline"]
    assert "which the plan does not name" in b["summary"]
    top, base = verdict["steps"][-1]["tiers"], verdict["steps"][0]["tiers"]
    assert abs(top["nginx"]["self_p50_ms"] - base["nginx"]["self_p50_ms"]) < 2
    assert verdict["calls"]["nginx"] == ["nginx-upstream"]


@pytest.mark.serial
def test_an_asgi_server_computing_with_no_log_is_named_for_the_cpu_it_fills(
    tmp_path: Path,
) -> None:
    need_nginx()
    need_module("uvicorn", "pip install uvicorn")
    verdict = run_scenario(
        scenarios.asgi_loop, tmp_path, users=(1, 9, 2), workers=2, path=COMPUTING
    )
    assert finding(verdict) == ("uvicorn", "cpu"), verdict["headline"]
    top = verdict["steps"][-1]
    assert top["resources"]["uvicorn"]["cpu_cores"] > 1.2
    assert "uvicorn" in top["tiers"]
