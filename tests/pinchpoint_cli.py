"""The `pinchpoint` command run from the tests as a user runs it, in a folder of its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pinchpoint.rundir import files
from pinchpoint_lab.ports import free_port


def pinchpoint(
    folder: Path, *args: str, timeout: float, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    """`pinchpoint ARGS` in `folder` to its end, its output kept, on a terminal `columns` wide."""
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=folder, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "COLUMNS": str(columns)},
    )  # fmt: skip


def run_scraped_at_its_end(folder: Path, *args: str) -> tuple[int, str, str]:
    """`pinchpoint run plan.toml -q ARGS --metrics` in `folder`, its /metrics scraped once
    the report is written, before the linger ends: its exit code, its stderr and the
    scrape."""
    port = free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "-q", *args,
         "--metrics", f"127.0.0.1:{port}", "--metrics-linger", "30"],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not list(folder.glob(f"runs/*/{files.REPORT}")):
            assert run.poll() is None, run.communicate()[1]
            assert time.monotonic() < deadline, "the run did not end"
            time.sleep(0.2)
        scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    finally:
        run.send_signal(signal.SIGINT)  # ends the linger
        _, stderr = run.communicate(timeout=30)
    return run.returncode, stderr, scraped
