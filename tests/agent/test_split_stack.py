"""A stack split over two agents: `pinchpoint run` gets every tagged record and every
resource series back from both, and computes the verdict."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from agent_helpers import TOKEN, run_cli
from split_stack import (
    APP,
    PROXY,
    TOKEN_ENV,
    Split,
    check_complete_run,
    loopback_split,
    netns_available,
    netns_split,
    plan_text,
    topology,
)

from pinchpoint.demo import NginxNotFound, find_nginx

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

Starter = Callable[[Path], AbstractContextManager[tuple[Split, list[dict]]]]


def run_split(tmp_path: Path, start: Starter) -> tuple[Path, str]:
    with start(tmp_path) as (split, components):
        hosts = {name: "a" for name in PROXY} | {name: "b" for name in APP}
        plan = tmp_path / "plan.toml"
        plan.write_text(plan_text(split.url, split.agents, topology(components, hosts)))
        os.environ[TOKEN_ENV] = TOKEN
        try:
            done = run_cli("run", str(plan), "--runs-dir", str(tmp_path / "runs"), "--quiet")
        finally:
            del os.environ[TOKEN_ENV]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [run_dir] = list((tmp_path / "runs").iterdir())
    return run_dir, done.stdout


def test_two_agents_on_loopback(tmp_path: Path) -> None:
    run_dir, stdout = run_split(tmp_path, loopback_split)
    check_complete_run(run_dir, ["a", "b"])
    assert "Not collected" not in stdout
    assert TOKEN not in (run_dir / "plan.toml").read_text()  # the token stays out of the run folder
    assert TOKEN not in (run_dir / "report.html").read_text()


def test_two_agents_in_network_namespaces(tmp_path: Path) -> None:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    run_dir, _ = run_split(tmp_path, netns_split)
    verdict = check_complete_run(run_dir, ["a", "b"])
    assert verdict["tiers"] == ["nginx", "gunicorn", "app"]
