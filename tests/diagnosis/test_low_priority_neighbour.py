"""The matrix's pool of waiting workers, its scenario of the quiet host, beside two cores
of busy loops at nice 19: the host reads full from the first step, yet the verdict still
names the pool, for the cores those loops hold are handed to the stack when it wants one."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import need_nginx, need_root

from pinchpoint_lab.matrix.draws import draw
from pinchpoint_lab.matrix.run import run_one
from pinchpoint_lab.neighbour import CpuHog

# Loads the host's cores: alone, after the rest of the suite.
pytestmark = pytest.mark.serial


def test_a_pool_of_waiting_workers_beside_niced_busy_loops_is_the_pool(tmp_path: Path) -> None:
    need_nginx()
    need_root("cgroups and the matrix's stacks")
    spec = next(s for s in draw(7, 44) if s.cls == "pool_wait")
    with CpuHog(cores=2.0, max_seconds=120, nice=19):
        outcome, verdict = run_one(spec, tmp_path, step_s=1.25)
    truth = spec.expected(False)
    assert (outcome.component, outcome.resource) == (truth.component, truth.resource), (
        outcome.headline
    )
    assert outcome.start_ok(spec.levels()), (outcome.starts_at_users, truth.starts_at_users)
    bottleneck = verdict["bottleneck"]
    assert "workers themselves mostly wait" in bottleneck["summary"]
    assert any("processes at low priority (nice)" in e for e in bottleneck["evidence"])
