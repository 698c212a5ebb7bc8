"""A healthy stack: enough workers and light work, so no bottleneck is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import need_nginx, run_scenario

from pinchpoint_lab import scenarios

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed


def test_enough_workers_and_light_work_name_no_bottleneck(tmp_path: Path) -> None:
    need_nginx()
    verdict = run_scenario(scenarios.healthy, tmp_path, users=(1, 5, 2), workers=8)
    assert verdict["bottleneck"] is None, verdict["headline"]
    assert verdict["headline"].startswith("No bottleneck from 1 to 5 users")
    assert all(s["errors"] == 0 for s in verdict["steps"])
