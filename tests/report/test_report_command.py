"""`pinchpoint report RUN` writes a run folder's page from its verdict alone, and refuses
a folder without one in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_run import HEADLINE


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "report", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_report_command_writes_the_page_from_the_verdict(run_dir: Path) -> None:
    (run_dir / "report.html").unlink(missing_ok=True)
    done = _report(str(run_dir))
    assert done.returncode == 0, done.stderr
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<!DOCTYPE html>" in page and "Plotly" in page
    assert HEADLINE in done.stdout
    assert "report:" in done.stdout


def test_report_command_without_a_verdict_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    done = _report(str(tmp_path))
    assert done.returncode == 2
    assert "no verdict.json" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "report.html").exists()
