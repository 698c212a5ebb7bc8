"""The plan for a URL, from the stack serving it on this host and on its agents' hosts."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.discover.agents import walk_with_agents
from pinchpoint.discover.plan_text import agent_components, plan_text
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.walk import Discovery, walk
from pinchpoint.plan.model import Agent


def init_plan(
    url: str, method: str = "GET", agents: list[Agent] | None = None
) -> tuple[str, Discovery]:
    """The plan's text for `url` (requested with `method`) and what was found on the way."""
    if agents:
        found = walk_with_agents(url, agents, READERS, method)
    else:
        found = walk(url, READERS, method=method)
    return plan_text(found), found


def agent_file(out: Path, agent: str) -> Path:
    """Where the components for an agent's config are written, beside the plan."""
    return out.with_name(f"{out.stem}.agent-{agent}.toml")


def write_plan(
    url: str, out: Path, method: str = "GET", agents: list[Agent] | None = None
) -> Discovery:
    """Writes the plan for `url` to `out`, and beside it each agent's components (refusing
    to overwrite a file); what was found."""
    text, found = init_plan(url, method, agents)
    extra = {agent_file(out, name): body for name, body in agent_components(found).items()}
    for path in [out, *extra]:
        if path.exists():
            raise FileExistsError(path)
    with out.open("x", encoding="utf-8") as f:
        f.write(text)
    for path, body in extra.items():
        with path.open("x", encoding="utf-8") as f:
            f.write(body)
    return found


def agents_from(specs: list[str], token_env: str | None) -> list[Agent]:
    """The agents named on the command line as NAME=URL; raises ValueError naming the one
    that is not."""
    from pydantic import ValidationError

    agents = []
    for spec in specs:
        name, eq, url = spec.partition("=")
        if not eq or not name or not url:
            raise ValueError(f"--agent {spec!r}: give NAME=URL, such as web=http://10.0.0.5:7070")
        try:
            agents.append(Agent(name=name, url=url, token_env=token_env))
        except ValidationError as e:
            reason = e.errors()[0]
            raise ValueError(f"--agent {spec!r}: {reason['loc'][0]}: {reason['msg']}") from None
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise ValueError(f"--agent: each agent once, not {sorted(names)}")
    return agents
