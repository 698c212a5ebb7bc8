"""`pinchpoint demo` cut short by Ctrl-C or SIGTERM: the run folder is finished with what
was measured, marked interrupted, the stack is stopped and the exit code is 128 + the
signal, as for `pinchpoint run`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_demo_says_so_in_its_exit_code_and_its_run(
    tmp_path: Path, sig: signal.Signals
) -> None:
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "pinchpoint", "demo", "-l", "1", "-u", "9", "-s", "2"]
    argv += ["-t", "3", "--runs-dir", str(runs), "--quiet"]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as demo:
        deadline = time.monotonic() + 60
        # The first step's records are on disk once the load has started.
        while not list(runs.glob("*/requests.arrows")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        demo.send_signal(sig)
        stdout, stderr = demo.communicate(timeout=120)
    assert demo.returncode == 128 + sig, stderr[-2000:]
    [run_dir] = list(runs.iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["interrupted"] is True
    assert len(run["steps"]) < 5, "the later steps were not run"
    assert (run_dir / "verdict.json").is_file() and (run_dir / "report.html").is_file()
    assert "interrupted" in stdout
