"""Every recorded run's verdict agrees with its own evidence, as recorded and with the
pools' sizes left out of its plan the way users write plans; a pool whose size the plan
does not state is found within one of its true size."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pinchpoint.analyze import analyze
from pinchpoint_lab.consistency import contradictions

DATA = Path(__file__).parent.parent / "data" / "runs"
RUNS = sorted(p.name for p in DATA.iterdir() if (p / "plan.toml").exists())
# The true pool of the recorded runs whose pool was full: slots of the server they ran.
POOLS = {
    "demo-pool2": ("gunicorn", 2),
    "db-scan-pool": ("uwsgi", 5),
    "gthread-pool-hog": ("gunicorn", 6),
}


def _copy(name: str, tmp_path: Path, workers: bool) -> Path:
    run = tmp_path / name
    shutil.copytree(DATA / name, run)
    (run / "verdict.json").unlink()
    if not workers:
        plan = run / "plan.toml"
        plan.write_text(re.sub(r"(?m)^workers = \d+\n", "", plan.read_text()))
    return run


@pytest.mark.parametrize("workers", [True, False], ids=["as-recorded", "no-workers"])
@pytest.mark.parametrize("name", RUNS)
def test_a_recorded_verdict_is_not_contradicted_by_its_evidence(
    name: str, workers: bool, tmp_path: Path
) -> None:
    verdict = analyze(_copy(name, tmp_path, workers))
    assert contradictions(verdict) == []


@pytest.mark.parametrize("name", sorted(POOLS))
def test_a_full_pool_the_plan_does_not_size_is_found_within_one(name: str, tmp_path: Path) -> None:
    verdict = analyze(_copy(name, tmp_path, workers=False))
    server, slots = POOLS[name]
    found = verdict["pools"][server]
    assert abs(found["slots"] - slots) <= 1, found
    assert found["found"] in ("server", "inferred")


def test_the_checks_catch_what_they_are_for() -> None:
    finding = {
        "component": "gateway",
        "resource": "time",
        "name": "gateway (its own time grows; no saturated resource found)",
        "summary": "",
        "evidence": [
            "client p50 latency grows from 1.2 ms at 4 users to 1.0 ms at 13 users",
            "gateway's own time (self + queue) grows by 0.05 ms, 3% of the growth; svc 0.01 ms",
            "host CPU 1.66 of 2 cores at 13 users, 1.66 at 13 users: the stack 0.40",
        ],
    }
    found = contradictions(
        {
            "headline": "Bottleneck: gateway from 4 users",
            "bottleneck": finding,
            "findings": [finding],
        }
    )
    assert len(found) == 3
    assert any("3% of the growth" in f for f in found)
    assert any("from 1.2 to 1.0 ms" in f for f in found)
    assert any("same load twice" in f for f in found)


def test_a_cpu_seen_in_a_tier_whose_time_is_flat_is_a_contradiction() -> None:
    finding = {
        "component": "nginx",
        "resource": "cpu",
        "name": "host CPU (2 cores), seen first in nginx's time",
        "summary": "",
        "evidence": ["nginx's own time (self + queue) at the median does not grow (0.00 ms)"],
    }
    verdict = {"headline": "", "bottleneck": finding, "findings": [finding]}
    assert contradictions(verdict) == [
        "host CPU (2 cores), seen first in nginx's time: its evidence says nginx's time is flat"
    ]
