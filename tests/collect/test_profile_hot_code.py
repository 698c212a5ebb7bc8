"""`pinchpoint run --profile` on a CPU-bound Flask app under gunicorn with one hot function
among cheaper ones: py-spy samples the heaviest step, the verdict's evidence names the hot
function first, the report draws the flame graph, and sampling costs little throughput.
Without permission to trace, the run says why and goes on."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinchpoint.collect.profiling.pyspy import PTRACE_HINT, pyspy_path
from pinchpoint.rundir import files
from pinchpoint_lab.hot_code import CHEAPER_FUNCTIONS, HOT_FUNCTION, HotCodeServer
from pinchpoint_lab.profile_cost import profile_cost

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [
    pytest.mark.serial,
    pytest.mark.skipif(pyspy_path() is None, reason="py-spy is not installed"),
]

STEPS = 'lower = 2\nupper = 6\nstep = 4\nduration = "3s"\nwarmup = "0.5s"'
# Samples a second: a 3 s step at the default 20 took 35, under the 50 the naming asks.
NAMING_RATE = "rate = 50"
# Three stages at the same users; the profile samples the middle one.
SAME_LOAD = "\n".join(
    ['warmup = "0.5s"', *(f"[[load.stage]]\nusers = 4\nhold = {h!r}" for h in ("5s",) * 3)]
)
# The test's bound on the throughput lost while sampling: the bench's target is 5%, as a
# median of repeats; one run on a shared machine moves by up to 15% between two steps at
# the same load, sampled or not.
COST_BOUND = 0.25
# py-spy's own CPU, as a share of the host's cores over its window: stable from run to
# run, as the throughput is not.
SAMPLER_CPU_BOUND = 0.05


@pytest.fixture(scope="module")
def server() -> Iterator[HotCodeServer]:
    work = Path(tempfile.mkdtemp(prefix="pinchpoint-hot-"))
    try:
        with HotCodeServer(work / "stack") as running:
            # Readable by the run that another user starts (the tracing test).
            for path in (work, running.workdir):
                path.chmod(0o755)
            yield running
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(plan: Path, runs: Path, *prefix: str) -> subprocess.CompletedProcess[str]:
    argv = [*prefix, sys.executable, "-m", "pinchpoint", "run", str(plan), "--profile"]
    return subprocess.run(
        [*argv, "--runs-dir", str(runs), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _run_dir(runs: Path) -> Path:
    (found,) = [p for p in runs.iterdir() if p.is_dir()]
    return found


def test_profile_names_the_hot_function_first_with_a_flame_graph(
    server: HotCodeServer, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(server.plan_text(STEPS, profile=NAMING_RATE))
    done = _run(plan, tmp_path / "runs")
    assert done.returncode in (0, 1), done.stderr
    run_dir = _run_dir(tmp_path / "runs")
    assert "[profile]" in (run_dir / files.PLAN).read_text()
    verdict = json.loads((run_dir / files.VERDICT).read_text())
    profiled = verdict["profile"]
    assert profiled["step"] == 1  # the heaviest of the two steps
    app = profiled["tiers"]["app"]
    assert app["samples"] >= 50
    assert app["by_self"][0]["function"].startswith(f"{HOT_FUNCTION} ")
    cheaper = [f for f in app["by_self"] if f["function"].split()[0] in CHEAPER_FUNCTIONS]
    assert all(f["self_share"] < app["by_self"][0]["self_share"] for f in cheaper)
    bottleneck = verdict["bottleneck"]
    assert bottleneck["component"] == "app"
    assert bottleneck["resource"] in ("cpu", "cpu_quota", "worker_pool")
    line = next(e for e in bottleneck["evidence"] if e.startswith("py-spy sampled app"))
    assert line.split("by own time ", 1)[1].startswith(f"{HOT_FUNCTION} (")
    report = (run_dir / files.REPORT).read_text()
    start = report.index('<svg class="flame"')
    svg = report[start : report.index("</svg>", start)]
    assert f"{HOT_FUNCTION} (" in svg
    assert "<script" not in svg and "href" not in svg  # drawn here, nothing fetched


def test_sampling_costs_little_throughput_against_the_same_step_unsampled(
    server: HotCodeServer, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(server.plan_text(SAME_LOAD, profile="step = 1\nduration = 4"))
    done = _run(plan, tmp_path / "runs")
    assert done.returncode in (0, 1), done.stderr
    run_dir = _run_dir(tmp_path / "runs")
    cost = profile_cost(run_dir, "app")
    app = json.loads((run_dir / files.VERDICT).read_text())["profile"]["tiers"]["app"]
    sampler_share = app["sampler_cpu_s"] / (app["end"] - app["start"]) / (os.cpu_count() or 1)
    print(
        f"profiled {cost.profiled_rps:.0f} req/s, unprofiled {cost.unprofiled_rps:.0f} req/s, "
        f"cost {100 * cost.cost:.1f}%; py-spy {100 * sampler_share:.1f}% of the cores"
    )
    assert cost.unprofiled_rps > 50
    assert cost.cost < COST_BOUND
    assert 0 < sampler_share < SAMPLER_CPU_BOUND


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to run pinchpoint as another user",
)
def test_a_run_refused_tracing_says_why_and_goes_on(server: HotCodeServer) -> None:
    work = Path(tempfile.mkdtemp(prefix="pinchpoint-noptrace-"))
    try:
        work.chmod(0o777)
        plan = work / "plan.toml"
        plan.write_text(server.plan_text('users = 2\nduration = "3s"'))
        plan.chmod(0o644)
        nobody = ("setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups")
        done = _run(plan, work / "runs", *nobody)
        assert done.returncode in (0, 1), done.stderr
        said = " ".join(done.stdout.split() + done.stderr.split())
        assert "profile of app: tracing pid" in said
        assert " ".join(PTRACE_HINT.split()) in said
        run_dir = _run_dir(work / "runs")
        assert (run_dir / files.VERDICT).is_file() and (run_dir / files.REPORT).is_file()
        stored = json.loads((run_dir / files.PROFILE).read_text())
        assert stored["tiers"]["app"]["samples"] == 0
        assert any("is refused" in p for p in stored["problems"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
