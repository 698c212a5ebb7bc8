"""What the verdict's rules know about the stack, and how they word numbers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pinchpoint.analyze.pool_size import PoolSize
from pinchpoint.rundir.shapes import EndpointJson, StepJson


@dataclass(frozen=True)
class Context:
    """What the verdict's rules know of the stack, built once per analysis."""

    order: list[str]
    calls: dict[str, list[str]]
    workers: dict[str, int]
    cpu_count: int
    generator_threads: int
    # The shortest latency of an answered request, for Little's-law worker estimates.
    min_latency_ms: float | None = None
    endpoint: str = "all requests"
    # Each component's role in the plan (proxy, app_server, database, ...).
    roles: dict[str, str] = field(default_factory=dict)
    # Generators on Ray (run.json `generators`): each one's CPU self-check, or `lost`.
    generators: list[dict[str, Any]] = field(default_factory=list)
    # Each app server's pool size and where it was found (analyze/pools.py), from the steps.
    pools: dict[str, PoolSize] = field(default_factory=dict)
    # Each named request of the plan on its own (analyze/endpoints.py).
    endpoints: list[EndpointJson] = field(default_factory=list)
    # Tiers that logged nothing, timed by their caller's upstream time (analyze/unlogged.py);
    # those the plan does not name at all run in no process it samples.
    timed_by: dict[str, str] = field(default_factory=dict)

    def unnamed(self, tier: str) -> bool:
        """Whether the tier is one the analysis added below a caller (`<caller>-upstream`)."""
        return tier in self.timed_by and tier not in self.roles


# Roles whose processes are no pool of request slots: event loops, backends per connection.
_NO_POOL = frozenset({"proxy", "database", "app"})


def from_onset(steps: list[StepJson], onset: StepJson) -> list[StepJson]:
    """The steps from the onset on (all of them when the onset is not one of them)."""
    return steps[position(steps, onset) :]


def position(steps: list[StepJson], step: StepJson) -> int:
    """Where a step is among the steps, lightest first (0 when it is not one of them)."""
    return next((i for i, s in enumerate(steps) if s is step), 0)


def users_text(n: int) -> str:
    return f"{n} user" if n == 1 else f"{n} users"


def level_of(step: StepJson) -> float:
    """A step's load level: its target rate in open loop, its users in closed loop."""
    level = step.get("level")
    return level if level is not None else step["users"]


def rate_of(step: Mapping[str, Any]) -> float | None:
    """An open-loop step's target rate (requests per second); None in closed loop."""
    return float(step.get("level") or 0.0) if step.get("kind") == "rate" else None


def load_text(step: Mapping[str, Any]) -> str:
    """A step's load level in words: "4 users", or in open loop "250 req/s"."""
    rate = rate_of(step)
    return users_text(step["users"]) if rate is None else f"{rate:g} req/s"


def start_text(bottleneck: Mapping[str, Any]) -> str:
    """Where a bottleneck starts: its users, or in open loop its target rate."""
    rate = bottleneck.get("starts_at_rate")
    return users_text(bottleneck["starts_at_users"]) if rate is None else f"{rate:g} req/s"


def ms_text(ms: float) -> str:
    return f"{ms:.1f} ms" if abs(ms) >= 1 else f"{ms:.2f} ms"


def cpu_of(step: StepJson, who: str) -> float | None:
    """The CPU a component (or `host`, `generator`) used in a step, in cores."""
    r = step.get("resources", {}).get(who)
    return r["cpu_cores"] if r else None


def resource_of(step: StepJson, who: str, key: str) -> float | None:
    value = step.get("resources", {}).get(who, {}).get(key)
    return float(value) if value is not None else None


def workers_of(tier: str, step: StepJson, ctx: Context) -> int | None:
    """The tier's worker count: from the plan, the server's own settings or Little's law
    (ctx.pools), else (for a tier that may be a pool of workers) its processes less a
    pre-fork master."""
    if tier in ctx.workers:
        return ctx.workers[tier]
    if tier in ctx.pools:
        return ctx.pools[tier].slots
    if ctx.roles.get(tier) in _NO_POOL:
        return None
    procs = step.get("resources", {}).get(tier, {}).get("processes")
    return procs - 1 if procs and procs > 1 else None


def pool_known(tier: str, ctx: Context) -> bool:
    """Whether the tier's pool size was found (plan, server settings, Little's law), not
    only counted from its processes."""
    return tier in ctx.workers or tier in ctx.pools


def tier_cost(step: Mapping[str, Any], tier: str) -> float | None:
    """A tier's own contribution to the latency of a step: self time plus the queue before
    it (p50s); None where the tier logged no time of its own in the step."""
    t = (step.get("tiers") or {}).get(tier)
    if not t or t.get("self_p50_ms") is None:
        return None
    return float(t["self_p50_ms"]) + float(t.get("queue_p50_ms") or 0.0)


def busy_of(tier: str, step: StepJson) -> float:
    """Requests in the tier at a time, by Little's law."""
    return float(step["tiers"].get(tier, {}).get("concurrency") or 0.0)


def callers_of(tier: str, ctx: Context) -> list[str]:
    return [caller for caller in ctx.order if tier in ctx.calls.get(caller, [])]


def below(tier: str, ctx: Context) -> list[str]:
    """The tier and every tier it calls, directly or through others, nearest first."""
    found: list[str] = []
    todo = [tier]
    while todo:
        name = todo.pop(0)
        if name not in found:
            found.append(name)
            todo.extend(ctx.calls.get(name, []))
    return found


def logged_callees(tier: str, calls: dict[str, list[str]], logged: set[str]) -> list[str]:
    """What the tier calls, a callee that logged nothing replaced by what it calls in turn
    (an app whose log the plan names but that wrote none): the tiers its time is spent in."""
    found: list[str] = []
    todo, seen = list(calls.get(tier, [])), {tier}
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in logged:
            found.append(name)
        else:
            todo.extend(calls.get(name, []))
    return found
