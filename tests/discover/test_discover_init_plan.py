"""The plan `pinchpoint init` writes for a real demo stack runs, every tier's log matched to
the run; the command writes it, says what it found, and never overwrites a file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from discover_helpers import HOST

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.discover.init import init_plan
from pinchpoint.discover.readers import READERS
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing
from pinchpoint_lab.ports import free_port

SHORT_LOAD = """[load]
lower = 1
upper = 5
step = 4
duration = "1s"
warmup = "0.2s"
timeout = "10s"
"""


def _nginx_reader_missing() -> str:
    if READERS["nginx"].__module__ == "pinchpoint.discover.readers":
        return "the nginx reader (discover/nginx.py) is not registered in READERS yet"
    return nginx_missing()


pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing()),
]


def _shortened(text: str) -> str:
    """The plan with its load cut to 1 then 5 users, a second each."""
    shorter, count = re.subn(r"\[load\]\n.*?\n\n", SHORT_LOAD + "\n", text, count=1, flags=re.S)
    assert count == 1, text
    return shorter


@pytest.mark.skipif(bool(_nginx_reader_missing()), reason=_nginx_reader_missing())
def test_the_plan_init_writes_for_the_demo_stack_runs_with_every_tiers_log(
    tmp_path: Path,
) -> None:
    with DemoStack(tmp_path / "stack", workers=3) as stack:
        text, found = init_plan(stack.url + "/sys_perf_check?cpu=1&wait=8")
        # The app inside gunicorn, from the probe's log named in gunicorn's environment.
        assert [t.name for t in found.tiers] == ["nginx", "gunicorn", "app"], found.problems
        assert found.calls == {"nginx": ["gunicorn"], "gunicorn": ["app"], "app": []}
        assert found.tiers[2].log_path == stack.probe_log
        text = _shortened(text)
        outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "runs")
    plan = parse_plan(text, "plan.toml")
    logged = [c.name for c in plan.component if c.log is not None]
    assert logged == ["nginx", "gunicorn", "app"]
    collection = json.loads((outcome.run_dir / "collection.json").read_text())["components"]
    for name in logged:
        assert collection[name]["matched"] > 0, (name, collection[name])
        assert collection[name]["unparseable"] == 0, (name, collection[name])
    top = outcome.verdict["steps"][-1]
    assert top["users"] == 5 and top["errors"] == 0
    assert {name: top["tiers"][name]["count"] > 0 for name in logged} == dict.fromkeys(logged, True)
    assert (outcome.run_dir / files.PLAN).read_text() == text


def _init(url: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "init", url, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_writes_the_stacks_plan_and_refuses_to_overwrite_it(tmp_path: Path) -> None:
    out = tmp_path / "plan.toml"
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        done = _init(stack.url + "/api/items", out)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"Wrote {out}: nginx"), done.stdout
        plan = parse_plan(out.read_text(), str(out))
        assert plan.target.url == stack.url
        assert plan.component[0].name == "nginx"
        written = out.read_text()
        again = _init(stack.url, out)
    assert again.returncode == 2
    assert f"{out} exists: give another file with -o" in again.stderr
    assert out.read_text() == written


def test_init_on_a_port_nobody_serves_writes_the_target_only(tmp_path: Path) -> None:
    out = tmp_path / "plan.toml"
    port = free_port()
    done = _init(f"http://{HOST}:{port}/x", out)
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).splitlines() == [
        f"Wrote {out} with the target only: nothing on this host listens at {HOST}:{port}"
    ]
    plan = parse_plan(out.read_text(), str(out))
    assert plan.target.url == f"http://{HOST}:{port}"
    assert plan.component == []
