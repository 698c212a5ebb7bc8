"""A CPU quota on the app tier: gunicorn's processes in a cgroup allowed half a core."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import finding, need_nginx, need_root, run_scenario

from pinchpoint_lab import scenarios
from pinchpoint_lab.cgroup import cpu_hierarchy

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = pytest.mark.serial


def test_cgroup_quota_is_named_with_its_throttling(tmp_path: Path) -> None:
    need_nginx()
    need_root("making a cgroup")
    hierarchy = cpu_hierarchy()
    if hierarchy is None:
        pytest.skip("no cgroup hierarchy with the cpu controller is mounted")
    verdict = run_scenario(scenarios.cpu_quota, tmp_path, cores=0.5)
    assert finding(verdict) == ("gunicorn", "cpu_quota"), verdict["headline"]
    assert "throttled" in verdict["headline"]
    top = verdict["steps"][-1]["resources"]["gunicorn"]
    assert top["cpu_quota_cores"] == pytest.approx(0.5)
    assert top["cpu_throttled_share"] >= 0.2
    assert top["cpu_cores"] <= 0.5 * 1.2  # the quota holds: never much more than half a core
    first = verdict["steps"][0]["resources"]["gunicorn"]
    assert first["cpu_throttled_share"] < top["cpu_throttled_share"]
    assert not list(hierarchy.point.glob("pinchpoint-*")), "the cgroup was left behind"
