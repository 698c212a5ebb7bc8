"""One cause of a tier's growing time, as a typed unit: what it reads, the resource it
saturates, and whether it needs a core (so that a neighbour's CPU could be what slows it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pinchpoint.analyze.context import Context
from pinchpoint.analyze.findings import Finding


@dataclass(frozen=True)
class Ask:
    """What a cause is asked about: the tier whose own time grew, the usable steps, the step
    its time grew from, the stack, the worker estimate, and the process group running it."""

    tier: str
    steps: list[dict]
    onset: dict
    ctx: Context
    estimate: dict | None
    group: str | None


@dataclass(frozen=True)
class Cause:
    resource: str  # as the verdict names it (`bottleneck.resource`)
    saturates: str | None  # the resource in words; None: nothing saturated (a tier's time)
    # What it reads of verdict.json: `tiers.<key>`, `resources.<key>` (`host.`, `generator.`),
    # `endpoints.<key>`, `pools`, or a step's own `<key>`.
    reads: tuple[str, ...]
    needs_cpu: bool  # a busy host can be what makes it grow
    find: Callable[[Ask], Finding | None] | None  # None: decided over the whole run
