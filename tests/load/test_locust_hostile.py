"""A locustfile's task that spins, exits or kills its process after 30 requests ends
`pinchpoint run` with what was measured, a message saying why, exit code 3 and a folder
`pinchpoint analyze` reads: a spinning task is stopped from inside (SIGUSR1) after
writing every one of the 30 records; a process that exits or is killed keeps the records
it had written. Real runs of the command against a server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from load_helpers import http_server

from pinchpoint.rundir import files

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

LOCUSTFILE = """
import os
import signal

from locust import HttpUser, constant, task

SENT = [0]


class Hit(HttpUser):
    wait_time = constant(0.01)

    @task
    def hit(self):
        self.client.get("/hello")
        SENT[0] += 1
        if SENT[0] == 30:
            HOW()
"""

HOW = {
    "spin": "(lambda: [None for _ in iter(int, 1)])",
    "exits": "(lambda: os._exit(0))",
    "killed": "(lambda: os.kill(os.getpid(), signal.SIGKILL))",
}

PLAN = """[target]
url = "http://127.0.0.1:{port}"

[load]
locustfile = "lf.py"
users = 1
duration = "12s"
warmup = "0s"
timeout = "1s"
"""


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "200"}
    env.pop("PINCHPOINT_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("how", "why", "kept"),
    [
        ("spin", "a Locust task held its process 3 s without yielding", "all"),
        ("exits", "the Locust process exited with status 0 before the run's end", "written"),
        ("killed", "the Locust process was killed by SIGKILL before the run's end", "written"),
    ],
)
def test_a_task_that_spins_exits_or_kills_its_process_ends_the_run_with_its_records(
    tmp_path: Path, how: str, why: str, kept: str
) -> None:
    (tmp_path / "lf.py").write_text(LOCUSTFILE.replace("HOW()", HOW[how] + "()"))
    with http_server() as (port, seen):
        (tmp_path / "plan.toml").write_text(PLAN.format(port=port))
        done = _cli(["run", "plan.toml", "--runs-dir", "runs", "--quiet"], tmp_path)
        sent = seen.count()
    said = " ".join(done.stderr.split())
    assert done.returncode == 3, done.stderr
    assert f"The run stopped early: {why}" in said, done.stderr
    assert "unexpected error" not in said and "Traceback" not in said
    [folder] = (tmp_path / "runs").iterdir()
    run = json.loads((folder / files.RUN).read_text())
    assert run["stopped"].startswith(why) and run["interrupted"]
    assert sent == 30
    requests = pl.read_parquet(folder / files.REQUESTS)
    assert requests["error"].null_count() == requests.height
    assert run["records"] == requests.height
    if kept == "all":
        # The stall's handler wrote the records not yet flushed: none lost.
        assert requests.height == 30
    else:
        # What the process had flushed (twice a second) is kept, nothing invented.
        assert requests.height <= 30
    # The step ended when the task broke the run (about 3 s in), not at its 12 s.
    [step] = run["steps"]
    assert step["end"] - step["start"] < 9.0
    analyzed = _cli(["analyze", str(folder)], tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
