"""A log the agent finds no file for is a warning of that agent, in collection.json and
among the run's problems, not 0 lines said nothing of."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import TOKEN_ENV, agent_thread, config_text

from pinchpoint.collect.gather import write_logs
from pinchpoint.collect.sources.remote import RemoteCollector
from pinchpoint.plan.model import Agent, Component


def test_a_log_missing_on_the_agent_is_its_warning(tmp_path: Path) -> None:
    missing = tmp_path / "gone.log"
    component = {"name": "app", "log": {"path": str(missing), "format": "probe"}}
    with agent_thread(config_text([component])) as server:
        remote = RemoteCollector(
            Agent(name="b", url=server.url, token_env=TOKEN_ENV), [Component(name="app", host="b")]
        )
        remote.start("ml-1", 0.1)
        remote.stop()
        collected = write_logs([remote], "ml-1", tmp_path, ["app"])
        remote.close()
    warning = f"app: log {missing}: no such file, 0 lines read"
    app = collected["components"]["app"]
    assert app["warnings"] == [warning] and app["lines"] == 0
    assert app["files"][str(missing)]["missing"] is True
    assert f"agent b: {warning}" in remote.problems
    assert f"agent b: {warning}" in collected["agents"]["b"]["problems"]
