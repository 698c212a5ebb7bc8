"""A run after the advice against what the advice predicted: measured at the load it was
predicted for, the setting found in the run, and refusals that name the folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinchpoint.compare.advice import check_advice, check_run_advice, read_prediction
from pinchpoint.rundir import files

PREDICTION = {
    "component": "gunicorn",
    "setting": "workers",
    "now": 2,
    "to": 6,
    "measured_rps": 180.0,
    "predicted_rps": 500.0,
    "at_users": 9,
    "limited_by": "cpu",
    "ceilings_rps": {"workers": 540.0, "cpu": 500.0, "load": 800.0},
    "line": "gunicorn workers 2 → 6: about 500 req/s at 9 users (now 180), ...",
}


def _after(slots: int, rates: dict[int, float]) -> dict:
    return {
        "pools": {"gunicorn": {"slots": slots, "found": "server", "source": "--workers"}},
        "steps": [{"users": u, "throughput_rps": r, "resources": {}} for u, r in rates.items()],
    }


def test_the_run_is_measured_at_the_load_the_prediction_was_made_for() -> None:
    checked = check_advice(
        "before", PREDICTION, _after(6, {1: 90.0, 5: 400.0, 9: 460.0, 13: 470.0})
    )
    assert (checked.at_users, checked.measured_rps) == (9, 460.0)
    assert checked.error == pytest.approx(460 / 500 - 1)
    assert checked.applied is True
    (line,) = checked.lines()
    assert "predicted about 500 req/s at 9 users (was 180); measured 460 req/s" in line
    assert line.endswith("(-8%).")


def test_the_words_give_the_rate_the_kept_check_holds() -> None:
    # 471.46 is kept as 471.5, which reads 472: the words must not say 471.
    checked = check_advice("before", PREDICTION, _after(6, {9: 471.46}))
    kept = checked.as_json()["measured_rps"]
    assert kept == 471.5
    assert f"measured {kept:.0f} req/s at 9 users" in checked.lines()[0]


def test_a_run_whose_pool_was_not_changed_says_so() -> None:
    checked = check_advice("before", PREDICTION, _after(2, {1: 90.0, 9: 181.0}))
    assert checked.applied is False
    assert "gunicorn has workers 2 in this run, not 6" in checked.lines()[1]


def test_processes_are_counted_without_the_master_and_a_quota_as_the_cgroup_gives_it() -> None:
    after = {"steps": [{"users": 9, "throughput_rps": 300.0, "resources": {"gunicorn": {
        "processes": 3, "cpu_quota_cores": 1.0}}}]}  # fmt: skip
    assert check_advice("b", {**PREDICTION, "setting": "processes", "to": 2}, after).applied
    quota = {**PREDICTION, "setting": "cpu_quota_cores", "now": 0.5, "to": 1.0}
    assert check_advice("b", quota, after).found == 1.0


def test_an_app_s_connections_are_checked_by_throughput_their_number_not_found() -> None:
    # No log or command line tells an app's pool of connections: the check says nothing of
    # the setting, only what the run measured against the prediction.
    pooled = {**PREDICTION, "component": "app", "setting": "connections", "to": 5}
    checked = check_advice("b", pooled, _after(2, {9: 400.0}))
    assert (checked.found, checked.applied) == (None, None)
    assert checked.as_json()["applied"] is None
    (line,) = checked.lines()
    assert line.startswith("Advice of b: app connections 2 → 5, predicted about 500 req/s")


def test_the_check_is_kept_in_the_new_run_folder(tmp_path: Path) -> None:
    after = tmp_path / "after"
    after.mkdir()
    (after / files.VERDICT).write_text(json.dumps(_after(6, {9: 505.0})))
    checked = check_run_advice(tmp_path / "before", PREDICTION, after)
    kept = json.loads((after / files.ADVICE_CHECK).read_text())
    assert kept["measured_rps"] == 505.0 and kept["error"] == round(checked.error, 3) == 0.01
    assert kept["before_run"] == "before" and kept["applied"] is True


def test_a_folder_without_a_prediction_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"verdict\.json: not found"):
        read_prediction(tmp_path)
    (tmp_path / files.VERDICT).write_text(json.dumps({"bottleneck": None}))
    with pytest.raises(ValueError, match=f"{tmp_path}: its verdict names no bottleneck"):
        read_prediction(tmp_path)
    cpu = {"bottleneck": {"component": "gunicorn", "resource": "cpu"}}
    (tmp_path / files.VERDICT).write_text(json.dumps(cpu))
    with pytest.raises(ValueError, match=r"\(gunicorn cpu\) predicts no change"):
        read_prediction(tmp_path)
    (tmp_path / files.VERDICT).write_text(json.dumps({"bottleneck": {"prediction": PREDICTION}}))
    assert read_prediction(tmp_path) == PREDICTION


def test_run_refuses_check_advice_of_a_run_without_prediction_before_any_load(
    tmp_path: Path,
) -> None:
    before = tmp_path / "runs" / "old"
    before.mkdir(parents=True)
    (before / files.VERDICT).write_text(json.dumps({"bottleneck": None}))
    plan = tmp_path / "plan.toml"
    plan.write_text('[target]\nurl = "http://127.0.0.1:9/"\n[load]\nusers = 1\nduration = "1s"\n'
                    '[[request]]\npath = "/"\n')  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "run", str(plan), "--check-advice", str(before),
         "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--check-advice {before}: its verdict names no bottleneck" in done.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["old"]
