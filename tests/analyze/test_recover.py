"""recover.py: run.json of a killed run rebuilt from its plan and its records, the verdict
and the report marked partial, and the folders it cannot rebuild refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.analyze import analyze
from pinchpoint.pipeline.recover import RecoveryError, recover
from pinchpoint.report.html import write_report

PLAN = """
[target]
url = "http://127.0.0.1:8080"

[load]
lower = 2
upper = 6
step = 2
duration = "2s"
warmup = "0.5s"

[[request]]
path = "/ok"
"""
T0_US = 1_790_000_000_000_000


def _requests(steps: list[tuple[int, int, float]]) -> pl.DataFrame:
    """Requests every 10 ms: (step, users, seconds) for each step, one after the other."""
    rows: dict[str, list] = {c: [] for c in ("req_id", "step", "users", "start_us")}
    at = T0_US
    for step, users, seconds in steps:
        for k in range(int(seconds * 100)):
            rows["req_id"].append(len(rows["req_id"]))
            rows["step"].append(step)
            rows["users"].append(users)
            rows["start_us"].append(at + k * 10_000)
        at += int(seconds * 1e6)
    n = len(rows["req_id"])
    return pl.DataFrame(rows).with_columns(
        pl.col("req_id").cast(pl.UInt64),
        pl.col("step").cast(pl.UInt32),
        pl.col("users").cast(pl.UInt32),
        pl.lit(0, pl.UInt16).alias("endpoint"),
        pl.col("start_us").alias("intended_us"),
        pl.lit(2_000, pl.Int64).alias("latency_us"),
        pl.lit(2_000, pl.Int64).alias("service_us"),
        pl.lit(200, pl.UInt16).alias("status"),
        pl.lit(None, pl.String).alias("error"),
        pl.Series("bytes", [3] * n, pl.UInt64),
    )


def _killed_folder(tmp_path: Path) -> Path:
    run_dir = tmp_path / "20261125-031500-abcd"
    run_dir.mkdir()
    (run_dir / "plan.toml").write_text(PLAN)
    # Killed 1.2 s into the second step.
    _requests([(0, 2, 2.0), (1, 4, 1.2)]).write_parquet(run_dir / "requests.parquet")
    return run_dir


def test_run_json_is_rebuilt_and_the_verdict_and_report_say_partial(tmp_path: Path) -> None:
    run_dir = _killed_folder(tmp_path)
    recovery = recover(run_dir)
    assert recovery.partial and recovery.rebuilt == ["run.json"]
    assert recovery.records == 320
    assert recovery.line() == (
        "Rebuilt run.json of a killed run from plan.toml and 320 request records."
    )

    run = json.loads((run_dir / "run.json").read_text())
    assert run["run_id"] == run_dir.name
    assert run["partial"] is True and run["interrupted"] is True
    assert run["warmup_s"] == 0.5 and run["records"] == 320
    first, second = run["steps"]
    assert (first["step"], first["users"], first["kind"]) == (0, 2, "users")
    assert first["start"] == T0_US / 1e6 and first["end"] == first["start"] + 2.0
    # The step the kill cut short ends at its last request sent.
    assert second["users"] == 4
    assert second["end"] == pytest.approx((T0_US + 2_000_000 + 1_190_000) / 1e6, abs=1e-5)
    assert run["recovered"]["missing"] == [
        "the resource samples (resources.parquet)",
        "the engine's histograms (histograms.json)",
    ], "a plan without components expects no tier logs"

    verdict = analyze(run_dir)
    assert verdict["partial"] is True and verdict["missing"] == run["recovered"]["missing"]
    assert [s["users"] for s in verdict["steps"]] == [2, 4]
    report = write_report(run_dir).read_text()
    assert 'id="partial"' in report and "PARTIAL: the run was killed" in report
    assert "resources.parquet" in report

    assert recover(run_dir).rebuilt == [], "a folder with run.json is left as it is"


@pytest.mark.parametrize(
    ("remove", "message"),
    [
        ("plan.toml", "run.json and plan.toml are missing"),
        ("requests.parquet", "no request was recorded"),
    ],
)
def test_a_folder_that_cannot_be_rebuilt_is_refused(
    tmp_path: Path, remove: str, message: str
) -> None:
    run_dir = _killed_folder(tmp_path)
    (run_dir / remove).unlink()
    with pytest.raises(RecoveryError, match=message):
        recover(run_dir)
    assert not (run_dir / "run.json").exists()


def test_a_knee_search_killed_before_its_levels_were_merged_is_refused(tmp_path: Path) -> None:
    # `--find-knee` leaves plan.toml as written: the probes' folder tells the search.
    run_dir = _killed_folder(tmp_path)
    (run_dir / "levels" / "0").mkdir(parents=True)
    with pytest.raises(RecoveryError, match="find_knee run killed during its search"):
        recover(run_dir)
    assert not (run_dir / "run.json").exists()
    (run_dir / "levels" / "0").rmdir()
    (run_dir / "levels").rmdir()
    assert recover(run_dir).rebuilt


def test_the_tiers_records_are_collected_again_from_the_whole_log(tmp_path: Path) -> None:
    from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT

    run_dir = _killed_folder(tmp_path)
    log = tmp_path / "gunicorn-access.log"
    run_id = run_dir.name

    def line(run: str, users: int, req: int) -> str:
        # gunicorn's format as the demo sets it: %(D)s is the duration in microseconds.
        query = f"pp_run={run}&pp_users={users}&pp_req={req}"
        return f'127.0.0.1 [25/Nov/2026:03:15:01 +0000] "GET /ok?{query} HTTP/1.0" 200 2 2000'

    # Requests 150 and 300 were sent in the steady parts of the two steps.
    lines = [line("an-earlier-run", 2, 0), line(run_id, 2, 150), line(run_id, 4, 300)]
    lines += [line("a-later-run", 4, 1)]
    log.write_text("\n".join(lines) + "\n")
    plan = PLAN + (
        f'\n[[component]]\nname = "gunicorn"\n'
        f'log = {{ path = "{log}", format = "gunicorn", log_format = {json.dumps(GUNICORN_FORMAT)} }}\n'
    )
    (run_dir / "plan.toml").write_text(plan)
    recovery = recover(run_dir)
    assert "tiers.parquet" in recovery.rebuilt and "collection.json" in recovery.rebuilt
    tiers = pl.read_parquet(run_dir / "tiers.parquet")
    assert sorted(zip(tiers["users"], tiers["req_id"], strict=True)) == [(2, 150), (4, 300)]
    counts = json.loads((run_dir / "collection.json").read_text())["components"]["gunicorn"]
    assert (counts["lines"], counts["matched"], counts["other_run"]) == (4, 2, 2)
    verdict = analyze(run_dir)
    assert [step["tiers"]["gunicorn"]["count"] for step in verdict["steps"]] == [1, 1]
