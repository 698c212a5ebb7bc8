"""`pinchpoint demo --apply`: the verdict's advice applied to the demo's own stack, run
again, and the throughput it predicted printed against the one measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Compares two runs' throughput, the second up to the host's CPU (7 workers computing):
# alone, after the rest. Beside the parallel part at idle priority its first verdict once
# named no pool to advise on; beside it at normal priority the second run served 1.41×
# the first where it serves over 1.5× alone.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(240)]


def test_the_advised_workers_are_applied_and_their_predicted_throughput_checked(
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "pinchpoint", "demo", "-l", "1", "-u", "7", "-s", "3"]
    argv += ["-t", "1.5", "--runs-dir", str(runs), "--quiet", "--apply"]
    env = {**os.environ, "COLUMNS": "300"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=200, check=False, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    before_dir, after_dir = sorted(runs.iterdir())
    before = json.loads((before_dir / "verdict.json").read_text())
    predicted = before["bottleneck"]["prediction"]
    assert (before["bottleneck"]["resource"], predicted["setting"]) == ("worker_pool", "workers")
    assert predicted["now"] == 2 and predicted["to"] > 2
    assert f"Applying the advice: gunicorn with {predicted['to']} workers." in done.stdout
    checked = json.loads((after_dir / "advice_check.json").read_text())
    after = json.loads((after_dir / "verdict.json").read_text())
    # The second stack had the advised pool, found from gunicorn's own command line.
    assert after["pools"]["gunicorn"]["slots"] == predicted["to"] and checked["applied"] is True
    # More workers for a pool of waiting workers: the heaviest step served more.
    assert checked["measured_rps"] > 1.5 * predicted["measured_rps"]
    assert checked["at_users"] == predicted["at_users"] == 7
    line = f"measured {checked['measured_rps']:.0f} req/s at 7 users"
    assert line in " ".join(done.stdout.split())
