"""Row-lock contention in PostgreSQL: every request updates the same row."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import finding, need_module, need_nginx, run_scenario

from pinchpoint_lab import scenarios
from pinchpoint_lab.postgres import find_postgres

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed


def test_hot_row_lock_waits_are_named(tmp_path: Path) -> None:
    need_nginx()
    need_module("psycopg", "pip install 'psycopg[binary]'")
    if find_postgres() is None:
        pytest.skip("PostgreSQL is not installed (apt: postgresql)")
    verdict = run_scenario(scenarios.hot_row, tmp_path, hold_ms=5)
    assert finding(verdict) == ("postgres", "db_lock"), verdict["headline"]
    steps = verdict["steps"]
    assert steps[-1]["resources"]["postgres"]["lock_waits"] >= 1
    assert steps[0]["resources"]["postgres"]["lock_waits"] < 0.5
    # The statements were matched to the run by their sqlcommenter tag, per request.
    assert steps[-1]["tiers"]["postgres"]["count"] == steps[-1]["tiers"]["app"]["count"]
    assert steps[-1]["tiers"]["postgres"]["p50_ms"] > 5 * steps[0]["tiers"]["postgres"]["p50_ms"]
    assert all(s["errors"] == 0 for s in steps)
