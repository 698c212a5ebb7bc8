"""`pinchpoint load --out` keeps its run folder private: the folder (and any folder made
for it) is 0700 and every file in it 0600."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

from load_helpers import http_server


def test_the_out_folder_is_0700_and_its_files_0600(tmp_path: Path) -> None:
    out = tmp_path / "new" / "load-1"
    with http_server() as (port, seen):
        url = f"http://127.0.0.1:{port}/"
        argv = ["load", url, "-c", "2", "-d", "0.5", "--out", str(out), "--json"]
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert seen.count() > 0
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"summary.json", "requests.parquet", "histograms.json"} <= {p.name for p in files}
    for folder in (tmp_path / "new", out):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
