"""A worker pool too small: gunicorn's and uWSGI's (nginx `uwsgi_pass`, `--processes 2`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from diagnosis_helpers import finding, need_nginx, run_scenario

from pinchpoint_lab import scenarios
from pinchpoint_lab.uwsgi import find_uwsgi

# Times a stack that waits more than it computes: one at a time, beside the parallel part.
pytestmark = pytest.mark.timed


def test_two_uwsgi_processes_are_the_bottleneck(tmp_path: Path) -> None:
    need_nginx()
    if find_uwsgi() is None:
        pytest.skip("uWSGI is not installed (pip install uwsgi, or apt: uwsgi-plugin-python3)")
    verdict = run_scenario(scenarios.uwsgi_pool, tmp_path, workers=2)
    assert finding(verdict) == ("uwsgi", "worker_pool"), verdict["headline"]
    assert verdict["bottleneck"]["starts_at_users"] in (3, 5)
    top = verdict["steps"][-1]["tiers"]["uwsgi"]
    assert top["queue_p50_ms"] > 10  # nginx waits on uWSGI's listen queue
    assert 1.5 <= top["concurrency"] <= 2.3
    [estimate] = verdict["workers_estimate"]
    assert 1.0 <= estimate["workers"] <= 2.5  # seed 001: peak throughput × minimal latency
    assert any("estimates" in line for line in verdict["bottleneck"]["evidence"])


def test_two_gunicorn_workers_are_the_bottleneck(tmp_path: Path) -> None:
    need_nginx()
    verdict = run_scenario(scenarios.gunicorn_pool, tmp_path, workers=2)
    assert finding(verdict) == ("gunicorn", "worker_pool"), verdict["headline"]
