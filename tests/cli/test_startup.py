"""The command starts fast: it imports the heavy stages (the pipeline, the analysis with
scipy, polars, the engine) only when a command runs them, so --help and a plan's error
are printed without them. Timings are in bench/startup.py; these check what is imported."""

from __future__ import annotations

import json
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from pinchpoint_lab.serving import serving

HEAVY = (
    "scipy",
    "polars",
    "pyarrow",
    "psutil",
    "pinchpoint._engine",
    "pinchpoint.pipeline",
    "pinchpoint.analyze",
    "pinchpoint.load",
    "pinchpoint.collect.resources.sampler",
)

TYPO_PLAN = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duraton = "1s"

[[request]]
path = "/"
"""


def _imported(args: list[str], cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The top-level modules and pinchpoint modules imported by `pinchpoint <args>`."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pinchpoint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    names = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    return names, done


def _heavy(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))


def test_load_help_imports_no_heavy_stage_nor_the_plan(tmp_path: Path) -> None:
    names, done = _imported(["load", "--help"], tmp_path)
    assert done.returncode == 0
    assert "--connections" in done.stdout
    assert _heavy(names) == []
    assert "pinchpoint.plan.model" not in names


def test_a_plan_with_a_typo_is_refused_without_importing_the_pipeline(tmp_path: Path) -> None:
    (tmp_path / "plan.toml").write_text(TYPO_PLAN)
    names, done = _imported(["run", "plan.toml"], tmp_path)
    assert done.returncode == 2
    assert "plan.toml:6: load.duraton: Extra inputs are not permitted" in done.stderr
    assert _heavy(names) == []
    assert "pinchpoint.plan.model" in names


def test_a_bad_url_for_load_is_refused_without_importing_the_engine(tmp_path: Path) -> None:
    names, done = _imported(["load", "http://127.0.0.1:99999/"], tmp_path)
    assert done.returncode == 2
    assert "Port out of range" in done.stderr
    assert _heavy(names) == []


# Runs `pinchpoint <args>` in this child, writing the modules imported at the moment the
# engine is asked to start (just before the first request) to argv[1].
AT_FIRST_REQUEST = """
import json, sys
from pinchpoint import _engine

real_start = _engine.start
seen = sys.argv[1]


def start(config):
    with open(seen, "w") as out:
        json.dump(sorted(sys.modules), out)
    return real_start(config)


_engine.start = start
sys.argv = ["pinchpoint", *sys.argv[2:]]
from pinchpoint.cli import main

main()
"""
# What the analysis and the report bring: none of it is wanted before the first request.
ANALYSIS = {"polars", "pyarrow", "plotly", "scipy", "numpy", "pandas"}


def _at_first_request(
    args: list[str], cwd: Path
) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules imported when `pinchpoint <args>` starts the engine, and how it ended."""
    seen = cwd / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", AT_FIRST_REQUEST, str(seen), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(seen.read_text())), done


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_load_sends_its_first_request_before_importing_the_heavy_libraries(
    tmp_path: Path,
) -> None:
    with serving(_Ok) as port:
        load = ["load", f"http://127.0.0.1:{port}/", "-c", "1", "-d", "0.2", "--json"]
        at_start, done = _at_first_request(load, tmp_path)
    assert json.loads(done.stdout)["requests"] > 0
    top = {name.split(".")[0] for name in at_start}
    assert {"pinchpoint", "typer"} <= top
    assert sorted(top & ANALYSIS) == []


# Wanted only after the first request: the live view's drawing (its first snapshot comes a
# second into the run), the summary's rendering, and the log formats a URL has none of.
AFTER_FIRST_REQUEST = {"rich.live", "rich.table", "pinchpoint.logformats", "pinchpoint.report"}


def test_load_of_a_url_starts_without_the_live_view_the_summary_or_the_log_formats(
    tmp_path: Path,
) -> None:
    with serving(_Ok) as port:
        load = ["load", f"http://127.0.0.1:{port}/", "-c", "1", "-d", "1.2"]
        at_start, done = _at_first_request(load, tmp_path)
    assert "requests" in done.stdout
    assert sorted(at_start & AFTER_FIRST_REQUEST) == []


def test_run_sends_its_first_request_before_importing_the_analysis(tmp_path: Path) -> None:
    """`run` collects while it loads (numpy, pyarrow and psutil may come with the
    collectors), but the analysis, the report and polars, scipy and plotly come after."""
    with serving(_Ok) as port:
        (tmp_path / "plan.toml").write_text(
            f'[target]\nurl = "http://127.0.0.1:{port}"\n'
            '[load]\nusers = 1\nduration = "0.3s"\nwarmup = 0\n[[request]]\npath = "/"\n'
        )
        run = ["run", "plan.toml", "--runs-dir", "runs", "-q", "--json"]
        at_start, _ = _at_first_request(run, tmp_path)
    [run_dir] = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["load_steps"][0]["requests"] > 0
    assert (run_dir / "verdict.json").exists(), "the analysis ran after the load"
    assert "pinchpoint.pipeline" in at_start
    top = {name.split(".")[0] for name in at_start}
    assert sorted(top & {"polars", "scipy", "plotly", "pandas"}) == []
    later = ("pinchpoint.analyze", "pinchpoint.report", "pinchpoint.pipeline.knee_levels")
    assert sorted(n for n in at_start if n.startswith(later)) == []
