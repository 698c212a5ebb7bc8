from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.importers import ImportFormatError, import_results

SAMPLES = Path(__file__).parent / "samples"

# 2026-11-22T10:15:00+01:00
T0_US = 1_795_338_900_000_000


def test_json_results(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLES / "vegeta_results.json", "vegeta", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests.height == 8
    assert requests["latency_us"].to_list() == [2180, 1987, 5123, 312, 2500, 30_000_412, 3, 1]
    assert requests["status"].to_list() == [200, 200, 500, 0, 200, 0, 200, 0]
    # vegeta's "500 Internal Server Error" is a response, not an error
    assert requests["error"].to_list() == [
        None,
        None,
        None,
        "connect_refused",
        None,
        "timeout",
        None,
        "reset",
    ]
    assert requests["error"].null_count() == 5
    assert requests["bytes"].to_list() == [12, 12, 21, 0, 12, 0, 12, 0]
    # nanosecond timestamps truncated to the microsecond; +01:00 and Z agree
    assert requests["start_us"][0] == T0_US + 123
    assert requests["start_us"][1] == T0_US + 10_098
    assert requests["start_us"][6] == T0_US + 60_000
    run = json.loads((run_dir / "run.json").read_text())
    assert run["source"] == {"tool": "vegeta", "file": "vegeta_results.json"}
    assert run["started"] == pytest.approx((T0_US + 123) / 1e6)
    assert run["ended"] == pytest.approx((T0_US + 50_000 + 30_000_412) / 1e6)


def test_csv_encoding(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLES / "vegeta_results.csv", "vegeta", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests["latency_us"].to_list() == [2180, 1987, 5123, 312]
    assert requests["status"].to_list() == [200, 200, 500, 0]
    assert requests["error"].to_list() == [None, None, None, "connect_refused"]
    assert requests["start_us"][0] == T0_US + 123


def test_garbage_lines_are_skipped_and_counted(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "results.json"
    shutil.copy(SAMPLES / "vegeta_results.json", source)
    with source.open("a") as f:
        f.write("not json at all\n")
        f.write('{"code": 200, "latency": 5}\n')
        f.write("[1, 2]\n")
        f.write('{"code":200,"timestamp":"yesterday","latency":5}\n')
        f.write('{"code":200,"timestamp":"2026-11-22T09:15:01Z","latency":-5}\n')
        f.write('{"code":200,"timestamp":"2026-11-22T09:15:01Z","latency":4000}\n')
    run_dir = import_results(source, "vegeta", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests.height == 9
    assert requests["latency_us"][-1] == 4
    run = json.loads((run_dir / "run.json").read_text())
    assert run["import"]["skipped_lines"] == 5
    reasons = {e["line"]: e["reason"] for e in run["import"]["skipped_examples"]}
    assert set(reasons) == {9, 10, 11, 12, 13}
    assert reasons[10] == "no 'timestamp' field"
    assert "not an RFC 3339 time" in reasons[12]
    assert reasons[13] == "latency -5 is negative"


def test_binary_results_get_a_hint(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "results.bin"
    source.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ImportFormatError, match=r"vegeta encode --to json"):
        import_results(source, "vegeta", runs_dir)


def test_nothing_readable_names_file_and_line(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "report.txt"
    source.write_text("\nRequests      [total, rate, throughput]  1, 1.00, 1.00\n")
    with pytest.raises(ImportFormatError) as caught:
        import_results(source, "vegeta", runs_dir)
    assert caught.value.line == 2
    assert str(caught.value).startswith(f"{source}, line 2: expected a JSON object or 9 or 12 CSV")


@pytest.mark.parametrize("name", ["vegeta_real.json", "vegeta_real.csv"])
def test_results_written_by_vegeta_itself(name: str, runs_dir: Path) -> None:
    # 40 requests at 40/s over /, /slow, /error and a closed port (see samples/README.md);
    # `vegeta report` said: status codes 0:10 200:20 500:10, latency max 62.044 ms.
    run_dir = import_results(SAMPLES / name, "vegeta", runs_dir)
    requests = pl.read_parquet(run_dir / "requests.parquet")
    assert requests.height == 40
    counts = dict(
        requests.group_by("status", "error")
        .len()
        .select(
            pl.concat_str([pl.col("status"), pl.col("error").fill_null("-")], separator=" "),
            "len",
        )
        .iter_rows()
    )
    assert counts == {"0 connect_refused": 10, "200 -": 20, "500 -": 10}
    assert requests["latency_us"].max() == 62_044
    assert requests["bytes"].sum() == 90
    # vegeta writes results as they complete, not as they were sent.
    run = json.loads((run_dir / "run.json").read_text())
    assert run["started"] == pytest.approx(requests["start_us"].min() / 1e6)
    assert requests["start_us"].min() == 1_795_434_000_614_977
