"""`pinchpoint run --out FILE.jsonl`: one JSON object per second of the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import polars as pl

from pinchpoint.load.hdr import Histogram
from pinchpoint.outputs.seconds import SecondsFile
from pinchpoint.rundir import files
from pinchpoint_lab.serving import serving


def _snapshot(requests: int, errors: int, classes: dict[str, int], ms: list[float]) -> dict:
    return {
        "requests": requests,
        "errors": errors,
        "errors_by_class": classes,
        "step": 1,
        "users": 4,
        "kind": "users",
        "level": 4.0,
        "window_requests": len(ms),
        "window_hdr_v2": Histogram.of([int(m * 1000) for m in ms]).v2(),
    }


def test_each_line_is_its_second_alone(tmp_path: Path) -> None:
    seconds = SecondsFile(tmp_path / "s.jsonl", "r1")
    seconds.write(_snapshot(100, 2, {"timeout": 2}, [10.0] * 98), now=100.0)
    seconds.write(_snapshot(300, 7, {"timeout": 3, "reset": 4}, [10.0] * 150 + [50.0] * 43), 102.0)
    seconds.close()
    first, second = (json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines())
    assert (first["requests"], first["errors"], first["errors_by_class"]) == (
        100,
        2,
        {"timeout": 2},
    )
    assert (second["requests"], second["errors"]) == (200, 5)
    assert second["errors_by_class"] == {"reset": 4, "timeout": 1}
    assert second["rps"] == 100.0  # 200 over the 2 s since the line before
    latency = second["latency_ms"]
    assert 9.9 <= latency["p50"] <= 10.1 and 49.9 <= latency["p99"] <= 50.1
    assert latency["p50"] <= latency["p90"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    assert second["run_id"] == "r1" and second["step"] == 1 and second["users"] == 4


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path.startswith("/ok") else 503)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_a_run_writes_a_line_a_second_whose_counts_add_up_to_the_run(tmp_path: Path) -> None:
    with serving(_Ok) as port:
        (tmp_path / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n\n'
            '[load]\nlower = 1\nupper = 2\nduration = "2s"\nwarmup = "0s"\nthink_time = "20ms"\n\n'
            '[[request]]\npath = "/ok"\nweight = 3\n\n[[request]]\npath = "/fail"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q", "--out", "s.jsonl"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    [run_dir] = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    print(f"\n{len(lines)} lines, {sum(x['requests'] for x in lines)} requests of {run['records']}")
    # Two steps of 2 s and the last second to the end; a second across the boundary (or
    # its requests still in flight) is one line per step.
    assert 4 <= len(lines) <= 8
    assert sum(x["requests"] for x in lines) == run["records"] == requests.height
    failed = requests.filter(pl.col("status") >= 400).height
    assert failed > 0 and sum(x["errors"] for x in lines) == failed
    assert sum(x["errors_by_class"].get("http_5xx", 0) for x in lines) == failed
    assert all("p95" in x["latency_ms"] for x in lines if x["requests"] > failed)
    # A step's requests still in flight at a tick may end in a line after the next step's.
    firsts = list(dict.fromkeys(x["step"] for x in lines))
    assert firsts == sorted(firsts)
    assert {x["step"] for x in lines} == {0, 1} and {x["run_id"] for x in lines} == {run["run_id"]}
    assert all(x["latency_ms"]["p50"] <= x["latency_ms"]["p99"] for x in lines if x["requests"])


# A file may grow to FILE_LIMIT bytes (the shell's `ulimit -f`, in 512-byte blocks); one
# that would grow past it fails its write with EFBIG, as a full disk fails with ENOSPC.
FILE_LIMIT = 64 << 20


def test_a_write_that_fails_mid_run_stops_the_run_with_its_folder_complete(
    tmp_path: Path,
) -> None:
    out = tmp_path / "s.jsonl"
    with out.open("wb") as f:  # sparse, with room for part of a line under the limit
        f.truncate(FILE_LIMIT - 100)
    with serving(_Ok) as port:
        (tmp_path / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n\n'
            '[load]\nlower = 1\nupper = 2\nduration = "6s"\nwarmup = "0s"\nthink_time = "20ms"\n\n'
            '[[request]]\npath = "/ok"\n'
        )
        limited = f'ulimit -f {FILE_LIMIT // 512} && trap "" XFSZ && exec "$@"'
        done = subprocess.run(
            ["sh", "-c", limited, "sh", sys.executable, "-m", "pinchpoint", "run", "plan.toml",
             "-q", "--out", "s.jsonl"],
            cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "COLUMNS": "300"},
        )  # fmt: skip
    said = " ".join(done.stderr.split())
    assert done.returncode == 3, done.stderr
    assert "unexpected error" not in said and "Traceback" not in said
    assert "The run stopped early: s.jsonl could not be written (File too large) after" in said
    [run_dir] = (tmp_path / "runs").iterdir()
    assert f"Run folder: runs/{run_dir.name}" in done.stdout
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["interrupted"] and "s.jsonl could not be written (File too large)" in run["stopped"]
    assert (run_dir / files.VERDICT).is_file() and (run_dir / files.REPORT).is_file()
    # Stopped at the first second's line, not after the plan's 12 s, with what it
    # measured kept.
    assert "after 0 lines" in run["stopped"]
    assert run["steps"][-1]["end"] - run["steps"][0]["start"] < 3.0
    assert run["records"] == pl.read_parquet(run_dir / files.REQUESTS).height > 0
    assert out.stat().st_size == FILE_LIMIT
