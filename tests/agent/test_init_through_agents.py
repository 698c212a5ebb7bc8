"""`pinchpoint init --agent`: a stack split over two hosts (two network namespaces) found end
to end through their agents, which read only the folders their configs list; the plan and
the agents' components it writes then run with every tier's log matched."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from agent_helpers import TOKEN, run_cli
from split_stack import TOKEN_ENV, netns_available, netns_split, start_agent

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.plan.model import parse_plan

try:
    find_nginx()
except NginxNotFound as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SHORT_LOAD = """[load]
lower = 1
upper = 3
step = 2
duration = "1.5s"
warmup = "0.3s"
timeout = "10s"
"""


def _shortened(text: str) -> str:
    shorter, count = re.subn(r"\[load\]\n.*?\n\n", SHORT_LOAD + "\n", text, count=1, flags=re.S)
    assert count == 1, text
    return shorter


@pytest.mark.timeout(240)
def test_a_stack_on_two_hosts_is_found_through_their_agents_and_runs(tmp_path: Path) -> None:
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    plan = tmp_path / "plan.toml"
    os.environ[TOKEN_ENV] = TOKEN
    try:
        with netns_split(tmp_path, discover=True) as (split, _):
            agents = [f"--agent={n}={a.url}" for n, a in split.agents.items()]
            done = run_cli(
                "init", f"{split.url}/sys_perf_check?cpu=1&wait=3", "-o", str(plan),
                *agents, "--token-env", TOKEN_ENV, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Wrote" in done.stdout and "nginx@a → gunicorn@b → app@b" in done.stdout, (
                done.stdout
            )
            written = parse_plan(plan.read_text(), str(plan))
            hosts = {c.name: c.host for c in written.component}
            assert hosts == {"nginx": "a", "gunicorn": "b", "app": "b"}
            assert {c.name: c.calls for c in written.component}["nginx"] == ["gunicorn"]
            assert {a.name for a in written.agent} == {"a", "b"}
            assert all(a.token_env == TOKEN_ENV for a in written.agent)
            snippets = {n: (tmp_path / f"plan.agent-{n}.toml").read_text() for n in "ab"}
            assert "ns-a/" in snippets["a"] and 'format = "nginx"' in snippets["a"]
            assert "gunicorn-access.log" in snippets["b"] and "gunicorn.pid" in snippets["b"]
            # The agents restarted with the components init found on their hosts.
            for name, agent in split.agents.items():
                agent.kill()
                split.agents[name] = start_agent(
                    tmp_path, f"{name}2", [], split.prefixes[name], bind=split.binds[name],
                    extra="\n" + snippets[name],
                )  # fmt: skip
            plan.write_text(_shortened(plan.read_text()))
            try:
                ran = run_cli("run", str(plan), "--runs-dir", str(tmp_path / "runs"), "--quiet")
            finally:
                for agent in split.agents.values():
                    agent.kill()
    finally:
        del os.environ[TOKEN_ENV]
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    [run_dir] = list((tmp_path / "runs").iterdir())
    collection = json.loads((run_dir / "collection.json").read_text())["components"]
    for name, agent in (("nginx", "a"), ("gunicorn", "b"), ("app", "b")):
        assert collection[name]["agent"] == agent, collection[name]
        assert collection[name]["matched"] > 20, collection[name]
        assert collection[name]["unparseable"] == 0, collection[name]


def test_an_agent_without_discover_refuses_to_discover(tmp_path: Path) -> None:
    from split_stack import start_agent as start

    agent = start(tmp_path, "plain", [{"name": "x", "log": {"path": str(tmp_path / "x.log"),
                                                            "format": "nginx"}}])  # fmt: skip
    try:
        os.environ[TOKEN_ENV] = TOKEN
        done = run_cli(
            "init", "http://10.255.255.1:9/x", "-o", str(tmp_path / "p.toml"),
            f"--agent=plain={agent.url}", "--token-env", TOKEN_ENV, timeout=60,
        )  # fmt: skip
    finally:
        del os.environ[TOKEN_ENV]
        agent.kill()
    assert done.returncode == 0, done.stderr
    assert "agent plain: status 403: discovery is off" in done.stdout, done.stdout
    assert parse_plan((tmp_path / "p.toml").read_text(), "p.toml").component == []
