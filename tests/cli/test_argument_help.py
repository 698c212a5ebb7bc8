"""Every argument and option of every command says what it is in --help."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer

from pinchpoint.cli import app

COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_parameter_has_help(name: str) -> None:
    command = COMMANDS[name]
    missing = [p.name for p in command.params if p.name != "help" and not getattr(p, "help", None)]
    assert missing == [], f"pinchpoint {name}: no help for {missing}"


def test_analyze_help_names_its_argument() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "analyze", "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0
    [line] = [line for line in done.stdout.splitlines() if line.strip().startswith("run_dir")]
    assert "The run folder" in line
