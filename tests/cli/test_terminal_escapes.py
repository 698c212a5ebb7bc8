"""What a run folder holds is printed with its control characters escaped: a recorded run's
verdict, its component and headline holding escape sequences (retitle the terminal, clear
the screen), as `pinchpoint report` prints it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pinchpoint.rundir import files

RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs" / "db-scan-pool"
HOSTILE = "postgres\x1b]0;owned\x07\x1b[2J\x9b31m"


def test_a_component_s_escape_sequences_are_printed_escaped(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RECORDED, run)
    verdict = json.loads((run / files.VERDICT).read_text())
    verdict["bottleneck"]["component"] = HOSTILE
    verdict["headline"] = verdict["headline"].replace("postgres", HOSTILE)
    (run / files.VERDICT).write_text(json.dumps(verdict))
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "report", str(run)],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in "\x1b\x07\x9b"), done.stdout
    # Rich drops a bell; the rest is shown as \xNN.
    escaped = "postgres\\x1b]0;owned\\x1b[2J\\x9b31m"
    assert f"used most by {escaped} from 3 users" in done.stdout
