"""`pinchpoint run` interrupted, as a real process against a real nginx on 127.0.0.1:
SIGTERM finishes the run folder (collection, verdict, report) marked interrupted; after
kill -9, `pinchpoint analyze` rebuilds the folder and gives a verdict and a report
marked partial."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import polars as pl
from signal_helpers import Nginx, finish, nginx, start, wait_until


def _plan(server: Nginx, folder: Path) -> Path:
    plan = folder / "plan.toml"
    plan.write_text(
        f"""
[target]
url = "http://127.0.0.1:{server.port}"

[load]
lower = 2
upper = 6
step = 2
duration = "2s"
warmup = "0s"
threads = 1

[[request]]
path = "/ok"

[[component]]
name = "nginx"
role = "proxy"
[component.log]
path = "{server.access_log}"
format = "nginx"
[component.process]
pid_file = "{server.pid_file}"
"""
    )
    return plan


def _run_dir(runs: Path) -> Path:
    wait_until(lambda: runs.is_dir() and any(runs.iterdir()), 60, "the run folder")
    (run_dir,) = runs.iterdir()
    return run_dir


def _in_second_step(server: Nginx) -> None:
    """Waits until the load is in its second step (nginx saw a request tagged 4 users)."""
    wait_until(lambda: "pp_users=4" in server.access_log.read_text(), 60, "the second step")


def test_sigterm_on_run_writes_the_folder_marked_interrupted(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        plan = _plan(server, tmp_path)
        proc = start(["run", str(plan), "-q", "--runs-dir", "runs"], tmp_path)
        run_dir = _run_dir(tmp_path / "runs")
        _in_second_step(server)
        proc.send_signal(signal.SIGTERM)
        code, stdout, stderr = finish(proc, 60)
        time.sleep(0.3)
        answered = server.answered()

    assert code == 143, stderr
    assert "The run was interrupted" in stdout
    run = json.loads((run_dir / "run.json").read_text())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert run["interrupted"] is True and verdict["interrupted"] is True
    assert "partial" not in verdict
    assert [s["users"] for s in run["steps"]] == [2, 4]
    requests = pl.read_parquet(run_dir / "requests.parquet")
    print(f"SIGTERM on run: nginx answered {answered}, {requests.height} recorded")
    assert requests.height == run["records"] == answered, "every answer is recorded"
    tiers = pl.read_parquet(run_dir / "tiers.parquet")
    assert tiers.height == answered, "nginx's lines of the run were collected"
    assert (run_dir / "collection.json").exists()
    assert "interrupted" in (run_dir / "report.html").read_text()


def test_analyze_after_kill_9_of_run_gives_a_partial_verdict_and_report(tmp_path: Path) -> None:
    with nginx(tmp_path / "nginx") as server:
        plan = _plan(server, tmp_path)
        proc = start(["run", str(plan), "-q", "--runs-dir", "runs"], tmp_path)
        run_dir = _run_dir(tmp_path / "runs")
        _in_second_step(server)
        time.sleep(0.5)
        proc.kill()
        finish(proc)
        answered = server.answered()
    assert sorted(p.name for p in run_dir.iterdir()) == ["plan.toml", "requests.arrows"]

    proc = start(["analyze", str(run_dir)], tmp_path)
    code, stdout, stderr = finish(proc, 120)

    assert code == 0, stderr
    assert "Traceback" not in stderr
    lines = stdout.splitlines()
    rebuilt = "Rebuilt requests.parquet, tiers.parquet, collection.json and run.json"
    assert any(line.startswith(rebuilt) for line in lines)
    assert any(line.startswith("PARTIAL: ") and "resources.parquet" in line for line in lines)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["partial"] is True and run["interrupted"] is True
    assert [s["users"] for s in run["steps"]] == [2, 4]
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["partial"] is True
    assert any("resources.parquet" in m for m in verdict["missing"])
    assert not any("tiers.parquet" in m for m in verdict["missing"])
    # nginx's lines of the run, found again in its whole log by their tag.
    assert pl.read_parquet(run_dir / "tiers.parquet").height == answered
    assert [s["users"] for s in verdict["steps"]] == [2, 4]
    report = (run_dir / "report.html").read_text()
    assert 'id="partial"' in report and "PARTIAL" in report
    requests = pl.read_parquet(run_dir / "requests.parquet")
    print(f"kill -9: nginx answered {answered}, {requests.height} records rebuilt")
    print(stdout)
    # The last batches, not yet written by the recorder, died with the process.
    assert 0 < requests.height <= answered

    # Analyzed again, the folder is still said to be partial.
    code, stdout, stderr = finish(start(["analyze", str(run_dir)], tmp_path), 120)
    assert code == 0, stderr
    assert "PARTIAL: " in stdout
