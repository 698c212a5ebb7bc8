"""`pinchpoint.open(path)`: a run folder's files from Python, read on first use."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import pinchpoint
from pinchpoint.analyze import analyze
from pinchpoint.api import Run
from pinchpoint.rundir.view import RunView

DEMO_RUN = Path(__file__).parent / "data" / "runs" / "demo-pool2"
PYTHON_DIR = Path(__file__).parents[1] / "python"


def test_open_gives_every_file_of_the_run() -> None:
    run = pinchpoint.open(DEMO_RUN)
    assert isinstance(run, Run) and isinstance(run, RunView)
    assert run.path == DEMO_RUN
    assert run.run_id == "20261122-031601-8871"

    assert isinstance(run.requests, pl.DataFrame)
    assert {"req_id", "step", "users", "start_us", "latency_us", "status", "error"} <= set(
        run.requests.columns
    )
    assert run.requests.height == run.run["records"]
    assert set(run.tiers["component"].unique()) == {"nginx", "gunicorn", "app"}
    assert {"ts", "component", "cpu_cores", "rss_bytes"} <= set(run.resources.columns)

    verdict = json.loads((DEMO_RUN / "verdict.json").read_text())
    assert run.verdict == verdict
    assert run.verdict["bottleneck"]["component"] == "gunicorn"
    assert [s["users"] for s in run.run["steps"]] == [1, 3, 5, 7]
    assert run.plan_text == (DEMO_RUN / "plan.toml").read_text()
    assert run.requests is run.requests  # read once
    scan = run.scan_requests()
    assert isinstance(scan, pl.LazyFrame)
    assert scan.select(pl.len()).collect().item() == run.requests.height


def test_open_takes_a_string_and_checks_an_sla(tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(DEMO_RUN, copy)
    analyze(copy)
    run = pinchpoint.open(str(copy))
    assert run.check_sla() == []  # the demo plan has no [sla]
    (p99,) = run.check_sla({"p99_ms": 30})
    assert not p99.passed
    assert [s.users for s in p99.broken_steps] == [5, 7]

    (copy / "plan.toml").write_text(run.plan_text + "\n[sla]\np99_ms = 100\n")
    analyze(copy)
    (p99,) = pinchpoint.open(copy).check_sla()
    assert p99.passed


def test_the_sla_is_read_from_the_verdict_not_checked_again(tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(DEMO_RUN, copy)
    (copy / "plan.toml").write_text((DEMO_RUN / "plan.toml").read_text() + "\n[sla]\np99_ms = 30\n")
    analyze(copy)
    (copy / "plan.toml").unlink()
    (copy / "requests.parquet").unlink()  # nothing left to check it on
    (p99,) = pinchpoint.open(copy).check_sla()
    assert [s.users for s in p99.broken_steps] == [5, 7]
    # A verdict from before the SLA was kept in it says so.
    verdict = json.loads((copy / "verdict.json").read_text())
    del verdict["sla"]
    (copy / "verdict.json").write_text(json.dumps(verdict))
    with pytest.raises(LookupError, match="analyze"):
        pinchpoint.open(copy).check_sla()


def test_missing_folder_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        pinchpoint.open(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        pinchpoint.open(tmp_path)
    copy = tmp_path / "run"
    shutil.copytree(DEMO_RUN, copy)
    (copy / "verdict.json").unlink()
    (copy / "tiers.parquet").unlink()
    run = pinchpoint.open(copy)
    assert run.requests.height > 0
    with pytest.raises(
        FileNotFoundError, match=r"verdict\.json: not found; run `pinchpoint analyze`"
    ):
        _ = run.verdict
    with pytest.raises(FileNotFoundError, match=r"tiers\.parquet: not found"):
        _ = run.tiers


def test_to_pandas_when_pandas_is_installed() -> None:
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pinchpoint.open(DEMO_RUN).requests.to_pandas()
    assert len(frame) == pinchpoint.open(DEMO_RUN).requests.height
    assert "latency_us" in frame.columns


def test_importing_pinchpoint_loads_nothing_until_open_is_called() -> None:
    script = f"""
import json, sys
sys.path.insert(0, {str(PYTHON_DIR)!r})
before = set(sys.modules)
import pinchpoint
after_import = sorted(set(sys.modules) - before)
run = pinchpoint.open({str(DEMO_RUN)!r})
print(json.dumps({{"import": after_import, "open": "pinchpoint.api" in sys.modules,
                   "polars": "polars" in sys.modules}}))
"""
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(out.stdout)
    assert report["import"] == ["pinchpoint"]
    assert report["open"] is True
    assert report["polars"] is False  # nothing read yet
