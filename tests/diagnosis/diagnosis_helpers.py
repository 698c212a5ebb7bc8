"""Real stacks with one known limit each, stepped for real through the pipeline."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from pinchpoint.demo import find_nginx
from pinchpoint.demo.errors import NginxNotFound
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.scenarios import Scenario

# Short steps: 1, 3, 5, 7 users, 2.5 s each (the first half second of each is warm-up).
USERS = (1, 7, 2)
STEP_S = 1.5
SCHEMA = Path(__file__).parent.parent.parent / "docs" / "verdict.schema.json"


def need_nginx() -> None:
    try:
        find_nginx()
    except NginxNotFound:
        pytest.skip("nginx is not installed (apt: nginx-light)")


def need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root")


def need_program(name: str, install: str) -> None:
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed ({install})")


def need_module(name: str, install: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"Python package {name} is not installed ({install})")


def run_scenario(
    builder: Callable[..., AbstractContextManager[Scenario]],
    tmp_path: Path,
    users: tuple[int, int, int] = USERS,
    **options: object,
) -> dict:
    """Starts the scenario's stack, runs its plan through the pipeline, stops the stack;
    the verdict."""
    with builder(tmp_path / "stack", **options) as scenario:
        text = scenario.plan(users=users, duration_s=STEP_S)
        outcome = execute(parse_plan(text), text, tmp_path / "runs")
    assert not outcome.interrupted
    print(f"{builder.__name__}: {outcome.verdict['headline']}")  # shown with pytest -s
    check_schema(outcome.run_dir / "verdict.json")
    return outcome.verdict


def check_schema(path: Path) -> None:
    """The verdict file matches docs/verdict.schema.json (when jsonschema is installed)."""
    if importlib.util.find_spec("jsonschema") is None:
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(json.loads(path.read_text()))
    ]
    assert errors == []


def finding(verdict: dict) -> tuple[str, str] | None:
    b = verdict["bottleneck"]
    return (b["component"], b["resource"]) if b else None
