"""`pinchpoint import` and `pinchpoint compare` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args], capture_output=True, text=True, timeout=120
    )


def write_csv(path: Path, latencies_s: np.ndarray) -> Path:
    ts = 1459452334.0 + np.arange(latencies_s.size) * 0.1
    path.write_text(
        "".join(f"{t:.2f}, {lat:.9f}\n" for t, lat in zip(ts, latencies_s, strict=True))
    )
    return path


def test_imported_csv_runs_compare_with_known_ratio(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base = rng.permutation(np.arange(1, 5001)) / 1e6
    old = write_csv(tmp_path / "old.csv", base * 2)
    new = write_csv(tmp_path / "new.csv", base)
    runs = tmp_path / "runs"
    for src in (old, new):
        done = cli("import", str(src), "--format", "csv", "--runs-dir", str(runs))
        assert done.returncode == 0, done.stderr
    a, b = sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime)
    done = cli(
        "compare", str(a), str(b), "--sla-ms", "5", "--json", "--out", str(tmp_path / "c.html")
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert "faster" in result["verdict"]
    assert (tmp_path / "c.html").stat().st_size > 1_000_000


def test_bad_import_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("not, numbers\nstill, not\n")
    done = cli("import", str(bad), "--format", "csv", "--runs-dir", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "bad.csv" in done.stderr
