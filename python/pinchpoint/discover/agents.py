"""The request followed across hosts: where it leaves this host (a hop nothing here listens
at), the agents of the plan are asked in turn to follow it on theirs (`POST /v1/discover`),
and the tiers each finds are placed on its host."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from pinchpoint.discover.listeners import Sockets
from pinchpoint.discover.tier import Address
from pinchpoint.discover.walk import (
    MOST_TIERS,
    Discovery,
    Reader,
    address_of,
    follow,
    free_name,
    touch,
)
from pinchpoint.discover.wire import WireError, address_json, from_json
from pinchpoint.plan.model import Agent

# One agent's answer for an address: its discovery, or why there is none.
Ask = Callable[[Agent, Address, str], "Discovery | str"]


def walk_with_agents(
    url: str, agents: list[Agent], readers: dict[str, Reader], method: str = "GET",
    ask: Ask | None = None,
) -> Discovery:  # fmt: skip
    """The tiers serving `url` on this host and on the agents' hosts."""
    ask = ask or ask_agent
    found = Discovery(url, method)
    found.agents = {a.name: a.url for a in agents}
    found.token_env = next((a.token_env for a in agents if a.token_env), None)
    touch(url, method, found)
    path = urlsplit(url).path or "/"
    follow(found, address_of(url), path, readers, Sockets.read())
    pending, found.leaves = found.leaves, []
    placed: dict[Address, str] = {}
    while pending and len(found.tiers) < MOST_TIERS:
        caller, address = pending.pop(0)
        if address not in placed:
            placed_at = _place(found, address, path, agents, ask, pending)
            if placed_at is None:
                continue
            placed[address] = placed_at
        _drop(found.problems, _nothing_at(address))
        if caller is not None and placed[address] not in found.calls.setdefault(caller, []):
            found.calls[caller].append(placed[address])
    return found


def _place(
    found: Discovery, address: Address, path: str, agents: list[Agent], ask: Ask,
    pending: list[tuple[str | None, Address]],
) -> str | None:  # fmt: skip
    """Asks each agent for the tiers at `address`; the first tier's name, or None (with the
    agents' reasons in the problems)."""
    if address.unix is not None:
        return None
    reasons = []
    for agent in agents:
        answer = ask(agent, address, path)
        if isinstance(answer, str):
            reasons.append(f"agent {agent.name}: {answer}")
            continue
        if not answer.tiers:
            continue
        return _merge(found, answer, agent.name, pending)
    _drop(found.problems, _nothing_at(address))
    found.problems.append(
        f"nothing on this host or the agents' hosts listens at {address}"
        + (f" ({'; '.join(reasons)})" if reasons else "")
    )
    return None


def _merge(
    found: Discovery, answer: Discovery, host: str, pending: list[tuple[str | None, Address]]
) -> str:
    """The agent's tiers into `found`, on its host, renamed where a name is taken."""
    renamed: dict[str, str] = {}
    for tier in answer.tiers:
        name = free_name(tier.name, found)
        renamed[tier.name], tier.name, tier.host = name, name, host
        tier.notes.append(f"found by agent {host}")
        found.tiers.append(tier)
    for caller, callees in answer.calls.items():
        if caller in renamed:
            found.calls[renamed[caller]] = [renamed.get(c, c) for c in callees]
    leaving = {_nothing_at(a) for _, a in answer.leaves}
    found.problems += [f"agent {host}: {p}" for p in answer.problems if p not in leaving]
    pending += [(renamed.get(c, c) if c else None, a) for c, a in answer.leaves]
    return renamed[answer.tiers[0].name]


def _nothing_at(address: Address) -> str:
    return f"nothing on this host listens at {address}"


def _drop(problems: list[str], problem: str) -> None:
    while problem in problems:
        problems.remove(problem)


def ask_agent(agent: Agent, address: Address, path: str) -> Discovery | str:
    """The agent's discovery from `address` on, or why there is none, in words."""
    headers = {}
    try:
        token = agent.bearer()
    except ValueError as e:
        return str(e)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    verify: bool | str = agent.ca_file or True
    try:
        with httpx.Client(timeout=agent.timeout, verify=verify, headers=headers) as client:
            response = client.post(
                f"{agent.url}/v1/discover", json={"address": address_json(address), "path": path}
            )
    except httpx.HTTPError as e:
        return f"no answer ({type(e).__name__})"
    if response.status_code != 200:
        return f"status {response.status_code}: {_error_of(response)}"
    try:
        return from_json(response.json(), f"http://{address}{path}")
    except (WireError, ValueError) as e:
        return f"an answer that is not a discovery ({e})"


def _error_of(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", ""))[:300]
    except (ValueError, AttributeError):
        return response.text[:300]
