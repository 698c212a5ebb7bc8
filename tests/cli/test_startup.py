"""The command starts fast: it imports the heavy stages (the pipeline, the analysis with
scipy, polars, the engine) only when a command runs them, so --help and a plan's error
are printed without them. Timings are in bench/startup.py; these check what is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
