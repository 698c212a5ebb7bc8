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
from pinchpoint.compare.advice_shapes import Prediction
from pinchpoint.rundir import files

PREDICTION: Prediction = {
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
    found = {"bottleneck": {**cpu["bottleneck"], "prediction": PREDICTION}}
    (tmp_path / files.VERDICT).write_text(json.dumps(found))
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


RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "db-scan-pool"
# Each a prediction that read as a dict before, then broke the check after the whole run.
DAMAGED = [
    ({k: v for k, v in PREDICTION.items() if k != "to"}, "to: field required"),
    ({**PREDICTION, "predicted_rps": 1e400}, "predicted_rps: input should be a finite number"),
    ({**PREDICTION, "at_users": [9]}, "at_users: input should be a valid integer (found [9])"),
    ({**PREDICTION, "now": "two"}, "now: input should be a valid number (found 'two')"),
    ({**PREDICTION, "at_users": "9"}, "at_users: input should be a valid integer (found '9')"),
    ({**PREDICTION, "setting": "threads"}, "setting: input should be 'workers', 'processes',"),
    ({**PREDICTION, "ceilings_rps": {"cpu": "x"}}, "ceilings_rps.cpu: input should be a valid"),
    ({**PREDICTION, "to": 10**400}, "to: input should be a valid number"),
]


def _before(folder: Path, prediction: object) -> Path:
    """A run folder whose verdict is a recorded run's, its bottleneck predicting `prediction`."""
    folder.mkdir(parents=True)
    verdict = json.loads((RECORDED / files.VERDICT).read_text())
    verdict["bottleneck"]["prediction"] = prediction
    (folder / files.VERDICT).write_text(json.dumps(verdict))
    return folder


@pytest.mark.parametrize(("prediction", "said"), DAMAGED)
def test_a_damaged_prediction_is_refused_naming_the_file_and_field(
    tmp_path: Path, prediction: dict, said: str
) -> None:
    before = _before(tmp_path / "before", prediction)
    with pytest.raises(ValueError) as refused:
        read_prediction(before)
    assert str(refused.value).startswith(f"{before / files.VERDICT}: bottleneck.prediction.{said}")


def test_a_recorded_run_s_verdict_is_checked_against_a_prediction(tmp_path: Path) -> None:
    before = _before(tmp_path / "before", PREDICTION)
    after = tmp_path / "after"
    after.mkdir()
    (after / files.VERDICT).write_text((RECORDED / files.VERDICT).read_text())
    checked = check_run_advice(before, read_prediction(before), after)
    steps = json.loads((RECORDED / files.VERDICT).read_text())["steps"]
    at_9 = [s for s in steps if s["users"] <= 9][-1]
    assert (checked.at_users, checked.measured_rps) == (at_9["users"], at_9["throughput_rps"])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"steps": [{"users": 9, "throughput_rps": 1e400}]}, "steps[0].throughput_rps: input"),
        ({"steps": [{"users": -1, "throughput_rps": 3.0}]}, "steps[0].users: input should be"),
        ({"steps": [{"throughput_rps": 3.0}]}, "steps[0].users: field required"),
        ({"pools": {"gunicorn": {"slots": "6"}}}, "pools.gunicorn.slots: input should be"),
        ({"steps": {"users": 9}}, "steps: input should be a valid list"),
    ],
)
def test_a_damaged_later_verdict_is_refused_naming_the_file_and_field(
    tmp_path: Path, change: dict, said: str
) -> None:
    after = tmp_path / "after"
    after.mkdir()
    (after / files.VERDICT).write_text(json.dumps({**_after(6, {9: 500.0}), **change}))
    with pytest.raises(ValueError) as refused:
        check_run_advice(tmp_path / "before", PREDICTION, after)
    assert str(refused.value).startswith(f"{after / files.VERDICT}: {said}")
    assert not (after / files.ADVICE_CHECK).exists()


def test_run_refuses_a_damaged_prediction_before_any_load(tmp_path: Path) -> None:
    before = _before(tmp_path / "runs" / "old", {**PREDICTION, "predicted_rps": 1e400})
    done = _run_checking(tmp_path, before)
    assert done.returncode == 2, done.stderr
    said = f"--check-advice {before / files.VERDICT}: bottleneck.prediction.predicted_rps: "
    assert said + "input should be a finite number (found inf)" in done.stderr
    assert "unexpected" not in done.stderr.lower()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["old"]


def test_a_component_s_control_characters_are_quoted_in_the_error(tmp_path: Path) -> None:
    # Its verdict predicts nothing: the error names its component, quoted as JSON.
    named = {"component": "gunicorn\x1b]0;owned\x07\n\x1b[2J", "resource": "cpu"}
    before = tmp_path / "runs" / "old"
    before.mkdir(parents=True)
    (before / files.VERDICT).write_text(json.dumps({"bottleneck": named}))
    done = _run_checking(tmp_path, before)
    assert done.returncode == 2, done.stderr
    assert not any(c in done.stderr for c in "\x1b\x07"), done.stderr
    quoted = '"gunicorn\\u001b]0;owned\\u0007\\n\\u001b[2J"'
    assert f"its verdict ({quoted} cpu) predicts no change" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def _run_checking(tmp_path: Path, before: Path) -> subprocess.CompletedProcess[str]:
    plan = tmp_path / "plan.toml"
    plan.write_text('[target]\nurl = "http://127.0.0.1:9/"\n[load]\nusers = 1\nduration = "1s"\n'
                    '[[request]]\npath = "/"\n')  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "run", str(plan), "--check-advice", str(before),
         "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
