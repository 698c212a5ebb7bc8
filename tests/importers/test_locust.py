from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.importers import ImportFormatError, import_results

SAMPLES = Path(__file__).parent / "samples"


def _copy_set(folder: Path, prefix: str = "locust") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("stats", "stats_history", "failures", "exceptions"):
        shutil.copy(SAMPLES / f"locust_{suffix}.csv", folder / f"{prefix}_{suffix}.csv")
    return folder


def test_real_locust_csv(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLES / "locust_stats.csv", "locust", runs_dir)
    names = sorted(p.name for p in run_dir.iterdir())
    assert names == ["run.json", "series.parquet", "summary.json"]  # no invented requests

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schema"] == "pinchpoint.summary/1"
    assert summary["tool"] == "locust"
    assert summary["requests"] == 88
    assert summary["errors"] == 5
    assert summary["error_rate"] == pytest.approx(5 / 88)
    assert summary["throughput_rps"] == pytest.approx(44.09736674151257)
    assert summary["mean_ms"] == pytest.approx(17.697877000004652)
    assert summary["latency_ms"] == {
        "p50": 8.0, "p66": 13.0, "p75": 31.0, "p80": 37.0, "p90": 46.0, "p95": 48.0,
        "p98": 59.0, "p99": 78.0, "p99.9": 78.0, "p99.99": 78.0, "p100": 78.0,
    }  # fmt: skip
    endpoints = {e["name"]: e for e in summary["endpoints"]}
    assert set(endpoints) == {"/", "/error", "/slow"}
    assert endpoints["/slow"]["requests"] == 24
    assert endpoints["/slow"]["latency_ms"]["p50"] == 40.0
    assert endpoints["/error"]["errors"] == 5
    assert endpoints["/error"]["method"] == "GET"
    assert summary["failures"][0]["occurrences"] == 5
    assert summary["failures"][0]["name"] == "/error"
    assert summary["duration_s"] == 2.0

    series = pl.read_parquet(run_dir / "series.parquet")
    assert series.height == 3
    assert series["ts"].to_list() == [1795317862.0, 1795317863.0, 1795317864.0]
    assert series["users"].to_list() == [0, 2, 4]
    assert series["p50_ms"].to_list() == [None, 12.0, 8.0]  # "N/A" before any request
    assert series["total_requests"].to_list() == [0, 27, 88]
    assert series["total_errors"].to_list() == [0, 2, 5]

    run = json.loads((run_dir / "run.json").read_text())
    assert run["source"]["tool"] == "locust"
    assert run["source"]["file"] == "locust_stats.csv"
    assert run["source"]["files"] == [
        "locust_stats.csv",
        "locust_stats_history.csv",
        "locust_failures.csv",
    ]
    assert run["started"] == 1795317862.0
    assert run["ended"] == 1795317864.0
    assert run["steps"] == [
        {"step": 0, "users": 2, "start": 1795317863.0, "end": 1795317864.0},
        {"step": 1, "users": 4, "start": 1795317864.0, "end": 1795317864.0},
    ]
    assert run["import"]["rows"] is None


@pytest.mark.parametrize("name", ["run_stats_history.csv", "run_failures.csv", "run", "."])
def test_any_file_of_the_set_or_the_prefix_or_folder(
    name: str, tmp_path: Path, runs_dir: Path
) -> None:
    folder = _copy_set(tmp_path / "results", "run")
    run_dir = import_results(folder / name, "locust", runs_dir)
    assert json.loads((run_dir / "summary.json").read_text())["requests"] == 88


def test_stats_alone(tmp_path: Path, runs_dir: Path) -> None:
    shutil.copy(SAMPLES / "locust_stats.csv", tmp_path / "only_stats.csv")
    run_dir = import_results(tmp_path / "only_stats.csv", "locust", runs_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json", "summary.json"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["started"] is None and run["ended"] is None
    assert "steps" not in run


def test_bad_history_rows_are_counted(tmp_path: Path, runs_dir: Path) -> None:
    folder = _copy_set(tmp_path / "results")
    with (folder / "locust_stats_history.csv").open("a") as f:
        f.write("1795317865,4,,Aggregated,fast\n")
        f.write(
            "1795317866,4,,Aggregated,0.0,0.0,9,13,31,37,46,48,59,78,78,78,78,x,5,8,17.7,3.9,78.3,3.0\n"
        )
    run_dir = import_results(folder / "locust_stats.csv", "locust", runs_dir)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["import"]["skipped_lines"] == 2
    reasons = [e["reason"] for e in run["import"]["skipped_examples"]]
    assert [e["line"] for e in run["import"]["skipped_examples"]] == [5, 6]
    assert reasons[0] == "locust_stats_history.csv: expected 24 fields, found 5"
    assert reasons[1] == "locust_stats_history.csv: Total Request Count 'x' is not a number"
    assert pl.read_parquet(run_dir / "series.parquet").height == 3


def test_not_locust_names_file_and_line(tmp_path: Path, runs_dir: Path) -> None:
    stats = tmp_path / "x_stats.csv"
    stats.write_text("Name,Count\n/,3\n")
    with pytest.raises(ImportFormatError) as caught:
        import_results(stats, "locust", runs_dir)
    assert caught.value.path == stats
    assert caught.value.line == 1
    assert "lacks column(s) Type, Request Count" in str(caught.value)


def test_missing_stats_file(tmp_path: Path, runs_dir: Path) -> None:
    shutil.copy(SAMPLES / "locust_stats_history.csv", tmp_path / "y_stats_history.csv")
    with pytest.raises(ImportFormatError, match=r"y_stats\.csv: no such file"):
        import_results(tmp_path / "y_stats_history.csv", "locust", runs_dir)
