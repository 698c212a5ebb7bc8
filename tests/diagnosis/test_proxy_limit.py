"""A proxy limiting connections: nginx `limit_conn 2` answers 503 while gunicorn idles."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import finding, need_nginx, run_scenario

from pinchpoint_lab import scenarios

# Alone, after the parallel part: at several hundred refusals a second its generator is
# busy, and beside the idle-priority lane one run judged it starved (its waits for a core
# were then held against the time no tier saw; see causes/generator.py).
pytestmark = pytest.mark.serial


def test_nginx_limit_conn_is_named_as_fast_refusals(tmp_path: Path) -> None:
    need_nginx()
    verdict = run_scenario(scenarios.proxy_limit, tmp_path, limit=2, workers=8)
    assert finding(verdict) == ("nginx", "proxy_limit"), verdict["headline"]
    assert verdict["bottleneck"]["starts_at_users"] == 3
    top = verdict["steps"][-1]
    assert top["errors_by_class"].get("503", 0) == top["errors"] > 0
    assert top["tiers"]["nginx"]["rejected"] == top["errors"]
    assert top["error_latency_p50_ms"] < top["latency_ms"]["p50"] / 2
    assert top["tiers"]["gunicorn"]["concurrency"] <= 2.2  # never more than the limit lets in
    assert any("had room" in line for line in verdict["bottleneck"]["evidence"])
