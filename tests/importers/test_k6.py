from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.importers import ImportFormatError, import_results

SAMPLE = Path(__file__).parent / "samples" / "k6_results.json"


def test_real_k6_output(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLE, "k6", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests.height == 17
    first = requests.row(0, named=True)
    # time 03:24:20.507178314Z is the request's end; value 18.615051 ms its duration
    assert first["latency_us"] == 18_615
    assert first["start_us"] == 1_795_317_860_507_178 - 18_615
    assert first["status"] == 200
    assert requests["latency_us"].to_list()[1:4] == [52_508, 5_142, 5_363]
    statuses = dict(requests.group_by("status").len().iter_rows())
    assert statuses == {200: 14, 500: 2, 0: 1}
    refused = requests.filter(pl.col("status") == 0).row(0, named=True)
    assert refused["error"] == "connect_refused"  # k6 error_code 1212
    assert refused["latency_us"] == 0
    assert requests["error"].null_count() == 16
    # http_req_failed: the 500s and the refused request
    assert requests["failed"].to_list().count(True) == 3
    assert requests.filter(pl.col("failed"))["status"].sort().to_list() == [0, 500, 500]
    # the vus gauge: one user throughout
    assert requests["users"].unique().to_list() == [1]
    assert requests["step"].unique().to_list() == [0]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["source"] == {"tool": "k6", "file": "k6_results.json"}
    assert [(s["step"], s["users"]) for s in run["steps"]] == [(0, 1)]
    assert run["import"]["lines"] == 198
    assert run["import"]["skipped_lines"] == 0


def test_gzipped_output(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "k6.json.gz"
    source.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    run_dir = import_results(source, "k6", runs_dir)
    assert pl.read_parquet(run_dir / "requests.parquet").height == 17


def _point(metric: str, time: str, value: float, **tags: str) -> str:
    data = {"time": time, "value": value, "tags": tags}
    return json.dumps({"metric": metric, "type": "Point", "data": data})


def test_ramping_vus_give_steps(tmp_path: Path, runs_dir: Path) -> None:
    lines = [
        _point("vus", "2026-11-22T10:00:00Z", 2),
        _point("http_req_duration", "2026-11-22T10:00:00.5Z", 100.0, status="200"),
        _point("vus", "2026-11-22T10:00:01Z", 2),
        _point("vus", "2026-11-22T10:00:02Z", 4),
        _point("http_req_duration", "2026-11-22T10:00:02.5Z", 200.0, status="200"),
        _point("http_req_duration", "2026-11-22T10:00:03Z", 30.0, status="0", error_code="1050"),
    ]
    source = tmp_path / "ramp.json"
    source.write_text("\n".join(lines) + "\n")
    requests = pl.read_parquet(import_results(source, "k6", runs_dir) / "requests.parquet")
    assert requests["users"].to_list() == [2, 4, 4]
    assert requests["step"].to_list() == [0, 1, 1]
    assert requests["error"].to_list() == [None, None, "timeout"]
    assert "failed" not in requests.columns  # no http_req_failed points
    assert requests["start_us"][0] == 1_795_341_600_400_000


def test_garbage_lines_are_counted(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "k6.json"
    shutil.copy(SAMPLE, source)
    with source.open("a") as f:
        f.write("{truncated\n")
        f.write('{"metric":"http_req_duration","type":"Point","data":{"time":"x","value":1}}\n')
        f.write(
            '{"metric":"http_req_duration","type":"Point","data":{"time":"2026-11-22T03:24:22Z"'
            ',"value":"fast"}}\n'
        )
    run_dir = import_results(source, "k6", runs_dir)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["import"]["skipped_lines"] == 3
    assert [e["line"] for e in run["import"]["skipped_examples"]] == [199, 200, 201]
    assert pl.read_parquet(run_dir / "requests.parquet").height == 17


def test_no_requests_names_file_and_line(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "summary.json"
    source.write_text('{\n  "metrics": {}\n}\n')
    with pytest.raises(ImportFormatError) as caught:
        import_results(source, "k6", runs_dir)
    assert caught.value.path == source
    assert caught.value.line == 1
    assert "no http_req_duration points" in str(caught.value)
