from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.importers import FORMATS, ImportFormatError, import_results

SAMPLE = Path(__file__).parent / "samples" / "latency_before.csv"
DOCUMENTED_SCHEMA = {
    "req_id": pl.UInt64,
    "step": pl.UInt32,
    "users": pl.UInt32,
    "start_us": pl.Int64,
    "latency_us": pl.Int64,
    "status": pl.UInt16,
    "error": pl.String,
    "bytes": pl.UInt64,
}


def test_sample_becomes_a_run_folder(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLE, "csv", runs_dir)
    assert run_dir.parent == runs_dir
    assert sorted(p.name for p in run_dir.iterdir()) == ["requests.parquet", "run.json"]
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert dict(requests.schema) == DOCUMENTED_SCHEMA
    assert requests.height == 20
    assert requests["req_id"].to_list() == list(range(20))
    assert requests["step"].unique().to_list() == [0]
    assert requests["users"].unique().to_list() == [0]
    assert requests["status"].null_count() == 20
    assert requests["error"].null_count() == 20
    # 1459452334.73, 0.00141596794128 — the notebook's first line
    assert requests.row(0, named=True)["start_us"] == 1_459_452_334_730_000
    assert requests.row(0, named=True)["latency_us"] == 1416
    assert requests["latency_us"].to_list()[1:3] == [1272, 1194]

    run = json.loads((run_dir / "run.json").read_text())
    assert run["run_id"] == run_dir.name
    assert run["source"] == {"tool": "csv", "file": "latency_before.csv"}
    assert run["started"] == pytest.approx(1459452334.73)
    assert run["ended"] == pytest.approx(1459452335.59 + 0.001346)
    assert run["import"]["rows"] == 20
    assert run["import"]["skipped_lines"] == 0
    assert "steps" not in run


def test_header_comments_and_garbage_lines(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "mixed.csv"
    source.write_text(
        "timestamp, latency\n"
        "1459452334.73, 0.00141596794128\n"
        "# a comment\n"
        "\n"
        "garbage\n"
        "1459452334.80, abc\n"
        "1459452334.90, 0.002, 7\n"
        "1459452335.00, -0.5\n"
        "1459452335.10, 0.0105\n"
    )
    run_dir = import_results(source, "csv", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests["latency_us"].to_list() == [1416, 10500]
    assert requests["start_us"].to_list() == [1_459_452_334_730_000, 1_459_452_335_100_000]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["import"]["lines"] == 9
    assert run["import"]["skipped_lines"] == 4
    assert [e["line"] for e in run["import"]["skipped_examples"]] == [5, 6, 7, 8]
    assert "latency 'abc' is not a number" in run["import"]["skipped_examples"][1]["reason"]


def test_file_with_no_rows_names_file_and_line(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "notes.csv"
    source.write_text("timestamp, latency\nfast, very\nslow; 3\n")
    with pytest.raises(ImportFormatError) as caught:
        import_results(source, "csv", runs_dir)
    message = str(caught.value)
    assert str(source) in message
    assert "line 2" in message
    assert "timestamp 'fast' is not a number" in message
    assert caught.value.line == 2
    assert not runs_dir.exists() or not list(runs_dir.iterdir())


def test_missing_file_and_unknown_format(tmp_path: Path, runs_dir: Path) -> None:
    with pytest.raises(ImportFormatError, match="no such file"):
        import_results(tmp_path / "nope.csv", "csv", runs_dir)
    with pytest.raises(ValueError, match="unknown import format 'jmeter'"):
        import_results(SAMPLE, "jmeter", runs_dir)
    assert set(FORMATS) == {"csv", "vegeta", "k6", "locust", "wrk2", "hdr"}


def test_each_import_gets_its_own_folder(runs_dir: Path) -> None:
    first = import_results(SAMPLE, "csv", runs_dir)
    second = import_results(SAMPLE, "csv", runs_dir)
    assert first != second
    assert sorted(p.name for p in runs_dir.iterdir()) == sorted([first.name, second.name])


def test_an_imported_run_folder_is_private(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLE, "csv", runs_dir)
    assert runs_dir.stat().st_mode & 0o777 == 0o700
    assert run_dir.stat().st_mode & 0o777 == 0o700
    assert {p.stat().st_mode & 0o777 for p in run_dir.iterdir()} == {0o600}
