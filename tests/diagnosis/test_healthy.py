"""A healthy stack: enough workers and light work, so no bottleneck is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import need_nginx, run_scenario

from pinchpoint_lab import scenarios

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = pytest.mark.serial


def test_enough_workers_and_light_work_name_no_bottleneck(tmp_path: Path) -> None:
    need_nginx()
    verdict = run_scenario(scenarios.healthy, tmp_path, users=(1, 5, 2), workers=8)
    assert verdict["bottleneck"] is None, verdict["headline"]
    assert verdict["headline"].startswith("No bottleneck from 1 to 5 users")
    assert all(s["errors"] == 0 for s in verdict["steps"])
