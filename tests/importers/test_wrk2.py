from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinchpoint.importers import ImportFormatError, import_results

SAMPLES = Path(__file__).parent / "samples"
WRK2 = SAMPLES / "wrk2_latency.txt"


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_wrk2_latency_output(runs_dir: Path) -> None:
    run_dir = import_results(WRK2, "wrk2", runs_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json", "summary.json"]
    summary = _summary(run_dir)
    assert summary["tool"] == "wrk2"
    assert summary["count"] == 10000
    assert summary["requests"] == 10000
    assert summary["throughput_rps"] == 1000.0
    assert summary["duration_s"] == 10.0
    assert summary["errors"] == 15  # 3 socket timeouts + 12 non-2xx/3xx
    assert summary["error_rate"] == 0.0015
    assert summary["socket_errors"] == {"connect": 0, "read": 0, "write": 0, "timeout": 3}
    assert summary["non_2xx_3xx"] == 12
    assert summary["url"] == "http://127.0.0.1:8080/"
    assert (summary["threads"], summary["connections"]) == (2, 16)
    assert summary["mean_ms"] == 5.001
    assert summary["stdev_ms"] == 2.887
    assert summary["min_ms"] == 0.001
    assert summary["max_ms"] == 10.007
    # the first spectrum row holding each percentile's share of the 10000 requests
    latency = summary["latency_ms"]
    assert latency["p50"] == 5.003
    assert latency["p90"] == 9.007
    assert latency["p99"] == 9.911
    assert latency["p99.9"] == 9.991
    assert latency["p100"] == 10.007
    assert summary["reported_ms"]["p50"] == 5.0
    assert summary["reported_ms"]["p99"] == 9.9
    spectrum = summary["spectrum"]
    assert len(spectrum) == 69
    assert spectrum[5] == {"latency_ms": 5.003, "percentile": 0.5, "count": 5003}
    assert spectrum[-1] == {"latency_ms": 10.007, "percentile": 1.0, "count": 10000}
    run = json.loads((run_dir / "run.json").read_text())
    assert run["source"] == {"tool": "wrk2", "file": "wrk2_latency.txt"}
    assert run["started"] is None


def test_bare_hdrhistogram_table_in_microseconds(runs_dir: Path) -> None:
    run_dir = import_results(SAMPLES / "hdr_spectrum.txt", "hdr:us", runs_dir)
    summary = _summary(run_dir)
    assert summary["tool"] == "hdr"
    assert summary["unit"] == "us"
    assert summary["count"] == 2001
    assert summary["min_ms"] == 0.1
    assert summary["max_ms"] == 25.007
    assert summary["latency_ms"]["p50"] == 1.143
    assert summary["latency_ms"]["p99.99"] == 25.007
    assert summary["mean_ms"] == pytest.approx(1.111457)
    assert "throughput_rps" not in summary


def test_bad_rows_are_skipped_and_counted(tmp_path: Path, runs_dir: Path) -> None:
    lines = WRK2.read_text().splitlines()
    first_row = lines.index("       0.001     0.000000            1         1.00")
    lines.insert(first_row + 2, "       1.5x0     0.150000         1500         1.18")
    lines.insert(first_row + 3, "       0.500     0.160000         1600")  # goes down
    source = tmp_path / "wrk2.txt"
    source.write_text("\n".join(lines) + "\n")
    run_dir = import_results(source, "wrk2", runs_dir)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["import"]["skipped_lines"] == 2
    examples = run["import"]["skipped_examples"]
    assert [e["line"] for e in examples] == [first_row + 3, first_row + 4]
    assert examples[1]["reason"] == "row goes down from the one before it"
    assert _summary(run_dir)["latency_ms"]["p99"] == 9.911


def test_uncorrected_spectrum_is_kept_apart(tmp_path: Path, runs_dir: Path) -> None:
    text = WRK2.read_text()
    table = text[text.index("  Detailed Percentile spectrum:") : text.index("----")]
    uncorrected = (
        "  Latency Distribution (HdrHistogram - Uncorrected Latency (measured without "
        "taking delay of start into account))\n 50.000%    2.50ms\n" + table
    )
    source = tmp_path / "wrk2-U.txt"
    source.write_text(text.replace("----", uncorrected + "----", 1))
    summary = _summary(import_results(source, "wrk2", runs_dir))
    assert summary["latency_ms"]["p50"] == 5.003
    assert summary["reported_ms"]["p50"] == 5.0
    assert summary["uncorrected"]["count"] == 10000
    assert summary["uncorrected"]["reported_ms"] == {"p50": 2.5}


def test_no_table_is_an_error(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "wrk.txt"
    source.write_text(
        "Running 10s test @ http://127.0.0.1:8080/\n"
        "  10000 requests in 10.00s, 1.17MB read\nRequests/sec:   1000.00\n"
    )
    with pytest.raises(ImportFormatError, match="wrk2 prints it with --latency"):
        import_results(source, "wrk2", runs_dir)


def test_table_of_garbage_names_file_and_line(tmp_path: Path, runs_dir: Path) -> None:
    source = tmp_path / "broken.txt"
    source.write_text(
        "       Value   Percentile   TotalCount 1/(1-Percentile)\n\n"
        "       0.5    half    10    2.00\n"
        "       0.7\n"
    )
    with pytest.raises(ImportFormatError) as caught:
        import_results(source, "wrk2", runs_dir)
    assert caught.value.line == 3
    assert str(caught.value).startswith(f"{source}, line 3: unreadable row")
    assert "(2 unreadable lines)" in str(caught.value)


def test_unknown_unit(runs_dir: Path) -> None:
    with pytest.raises(ImportFormatError, match="unknown unit 'parsec'"):
        import_results(SAMPLES / "hdr_spectrum.txt", "hdr:parsec", runs_dir)
