"""The named request that carries the bottleneck's work.

A journey mixes cheap requests and costly ones; a median over all of them is a cheap one's.
So each named request is charged what it costs the bottleneck's component: its own time in
the component's tiers (self time, not the queue before them) times how many of it the
heaviest step served. When one request carries most of that work and each of its calls
costs the component several times what the others' do on average, the limit is named in
that request: it is the one to make cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.analyze.context import Context, level_of, load_text, ms_text
from pinchpoint.analyze.thresholds import CARRIES, DOMINATES
from pinchpoint.analyze.usage import process_group
from pinchpoint.rundir.shapes import EndpointJson, EndpointStepJson, StepJson


@dataclass(frozen=True)
class Carrier:
    """The request, its share of the component's work, and its cost per call against the
    other requests' average."""

    name: str
    component: str
    share: float
    own_ms: float
    others_ms: float

    def line(self, step: StepJson) -> str:
        return (
            f"{self.name} carries {self.share:.0%} of {self.component}'s work at "
            f"{load_text(step)}: {ms_text(self.own_ms)} in {self.component} a request, the "
            f"other requests {ms_text(self.others_ms)} on average"
        )


def carrying_request(component: str, steps: list[StepJson], ctx: Context) -> Carrier | None:
    """The named request that carries most of the component's work at the heaviest step,
    each of its calls costing DOMINATES times the others' average; None otherwise (one
    request, or the work spread over several)."""
    tiers = [t for t in ctx.order if process_group(t, steps, ctx) == component] or [component]
    level = level_of(steps[-1])
    costs: dict[str, tuple[int, float]] = {}
    for entry in ctx.endpoints:
        step = _at(entry, level)
        if step is not None:
            costs[str(entry["endpoint"])] = (int(step["requests"]), _own_ms(step, tiers))
    if len(costs) < 2:
        return None
    work = {name: count * own for name, (count, own) in costs.items()}
    total = sum(work.values())
    if total <= 0:
        return None
    name = max(work, key=lambda n: work[n])
    own = costs[name][1]
    others = sum(c for n, (c, _) in costs.items() if n != name)
    others_ms = (total - work[name]) / others if others else 0.0
    share = work[name] / total
    if share < CARRIES or own < DOMINATES * others_ms:
        return None
    return Carrier(name, component, share, own, others_ms)


def _at(entry: EndpointJson, level: float) -> EndpointStepJson | None:
    steps = entry.get("steps") or []
    return next((s for s in steps if s.get("level") == level), None)


def _own_ms(step: EndpointStepJson, tiers: list[str]) -> float:
    """The request's own time in these tiers (their self times, never below 0)."""
    found = step.get("tiers") or {}
    return sum(max(0.0, (found.get(t) or {}).get("self_p50_ms") or 0.0) for t in tiers)
