"""The real demo stack, stepped for real: the verdict names what limits it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

# Two workers that wait (the pool) go with the timed tests, beside the parallel ones at
# low priority; 24 workers load the host's cores and run alone, after them.
WAITING, LOADING = pytest.mark.timed, pytest.mark.serial

STEPS = ["-l", "1", "-u", "7", "-s", "2", "-t", "1.5"]


def run_demo(runs_dir: Path, workers: int, upper: int = 7) -> Path:
    argv = [sys.executable, "-m", "pinchpoint", "demo", *STEPS, "--workers", str(workers)]
    argv[argv.index("-u") + 1] = str(upper)
    argv += ["--runs-dir", str(runs_dir), "--quiet"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    [run_dir] = list(runs_dir.iterdir())
    runs_dir.with_name(runs_dir.name + ".out").write_text(done.stdout)
    return run_dir


@pytest.fixture(scope="module")
def small_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_demo(tmp_path_factory.mktemp("runs"), workers=2)


@pytest.fixture(scope="module")
def large_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_demo(tmp_path_factory.mktemp("runs"), workers=24, upper=9)


@WAITING
def test_two_workers_are_named_as_the_bottleneck(small_pool: Path) -> None:
    verdict = json.loads((small_pool / "verdict.json").read_text())
    b = verdict["bottleneck"]
    assert b is not None, verdict["headline"]
    assert (b["component"], b["resource"]) == ("gunicorn", "worker_pool"), verdict["headline"]
    # With 2 workers and ~10 ms per request, 3 users already wait for a worker.
    assert b["starts_at_users"] in (3, 5)
    top = verdict["steps"][-1]["tiers"]["gunicorn"]
    assert top["queue_p50_ms"] > 10
    assert 1.5 <= top["concurrency"] <= 2.2
    # The probe's throughput stops at the pool's ceiling while its latency grows.
    [endpoint] = verdict["endpoints"]
    assert endpoint["behaviour"] == "synchronous", endpoint["summary"]


@WAITING
def test_the_demo_runs_the_plan_init_finds_on_its_stack(small_pool: Path) -> None:
    said = small_pool.parent.with_name(small_pool.parent.name + ".out").read_text()
    assert "Tiers found by `pinchpoint init`: nginx → gunicorn → app" in said
    plan = (small_pool / "plan.toml").read_text()
    assert "workers" not in plan
    # The pool's size was read from gunicorn's command line, not told.
    verdict = json.loads((small_pool / "verdict.json").read_text())
    assert verdict["pools"]["gunicorn"]["found"] == "server"
    assert verdict["pools"]["gunicorn"]["slots"] == 2


@LOADING
def test_enough_workers_move_the_verdict_off_the_pool(large_pool: Path) -> None:
    verdict = json.loads((large_pool / "verdict.json").read_text())
    b = verdict["bottleneck"]
    assert b is None or b["resource"] == "cpu", verdict["headline"]
    for step in verdict["steps"]:
        # Never more requests in gunicorn than users: the 24-worker pool is never full.
        assert step["tiers"]["gunicorn"]["concurrency"] <= step["users"] + 0.5
    if b is not None:
        onset = next(s for s in verdict["steps"] if s["users"] == b["starts_at_users"])
        assert onset["resources"]["host"]["cpu_cores"] >= 0.85 * 2 or b["resource"] == "cpu"


@WAITING
def test_every_tier_logged_every_steady_request_of_the_run(small_pool: Path) -> None:
    requests = pl.read_parquet(small_pool / "requests.parquet")
    tiers = pl.read_parquet(small_pool / "tiers.parquet")
    answered = set(requests.filter(pl.col("status") == 200)["req_id"].to_list())
    for name in ("nginx", "gunicorn", "app"):
        logged = set(tiers.filter(pl.col("component") == name)["req_id"].to_list())
        assert logged == answered, name
    collection = json.loads((small_pool / "collection.json").read_text())
    assert collection["components"]["nginx"]["matched"] == len(answered)


@WAITING
def test_run_folder_holds_plan_data_verdict_and_report(small_pool: Path) -> None:
    for name in (
        "plan.toml",
        "run.json",
        "requests.parquet",
        "tiers.parquet",
        "resources.parquet",
        "collection.json",
        "verdict.json",
        "report.html",
    ):
        assert (small_pool / name).stat().st_size > 0, name
    resources = pl.read_parquet(small_pool / "resources.parquet")
    assert {"host", "generator", "nginx", "gunicorn"} <= set(resources["component"].to_list())
    html = (small_pool / "report.html").read_text()
    assert "gunicorn" in html
    assert "<script src=" not in html  # plotly.js is inlined: the page works offline


@WAITING
def test_a_second_analysis_of_the_folder_gives_the_same_verdict(small_pool: Path) -> None:
    first = json.loads((small_pool / "verdict.json").read_text())
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "analyze", str(small_pool)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    again = json.loads((small_pool / "verdict.json").read_text())
    assert again["bottleneck"] == first["bottleneck"]
    assert "Bottleneck: gunicorn worker pool" in done.stdout
