"""One cause the verdict can name, as a typed unit: its unique name, the resource users see,
what it reads, the thresholds it judges by, whether it needs a core (so that a neighbour's
CPU could be what slows it), how it is found, and what the stages after the decision do
with a finding of it (hot code, the database's inside, the effect of its advice)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pinchpoint.analyze.context import Context
from pinchpoint.rundir.shapes import StepJson

if TYPE_CHECKING:
    from pinchpoint.analyze.ceilings import Prediction

# Where the verdict asks a cause: `run`, of the whole run before any tier (the first that
# fires decides); `tier`, of a tier whose own time grew (the first that fires names it);
# `beside`, of the whole run as a finding of its own next to the decision; `within`, named
# by another cause's `find` (the CPU, told apart from a pool by what a worker wants).
Scope = Literal["run", "tier", "beside", "within"]
# What the database's samples add to a finding on a database (analyze/database/evidence.py).
DatabaseInside = Literal["locks", "statements"]


@dataclass(frozen=True)
class Finding:
    """What limits a component. Built once: a stage that says more makes a new one
    (`dataclasses.replace`)."""

    component: str
    cause: Cause  # what it names; verdict.json shows its `resource`
    starts_at_users: int
    evidence: Sequence[str]
    name: str  # for the headline: "Bottleneck: <name> from <n> users"
    summary: str
    # Open loop: the target rate (requests/s) of the step where it starts.
    starts_at_rate: float | None = None

    @property
    def resource(self) -> str:
        """The resource as verdict.json names it."""
        return self.cause.resource


# What a run cause may ask of the registry: the finding that names a tier's growth, from
# the tier, the usable steps, the step it grew from, the stack and the worker estimate.
TierFinding = Callable[[str, list[StepJson], StepJson, Context, "dict[str, Any] | None"], Finding]


@dataclass(frozen=True)
class Ask:
    """What a tier cause is asked about: the tier whose own time grew, the usable steps,
    the step its time grew from, the stack, the worker estimate, and the process group
    running it."""

    tier: str
    steps: list[StepJson]
    onset: StepJson
    ctx: Context
    estimate: dict[str, Any] | None
    group: str | None


@dataclass(frozen=True)
class RunAsk:
    """What a run cause is asked about: the usable steps, the stack, the generator's
    self-check and how the causes being asked name a tier."""

    steps: list[StepJson]
    ctx: Context
    generator: dict[str, Any]
    tier_finding: TierFinding


@dataclass(frozen=True)
class Judged:
    """A run cause's finding with how sure it is, the request it lives in, and the
    headline it replaces the verdict's with."""

    finding: Finding
    confidence: float
    request: str | None = None
    headline: str | None = None


@dataclass(frozen=True)
class Cause:
    # Unique among the causes: the one a finding names (`Finding.cause`).
    name: str
    # As verdict.json names it (`bottleneck.resource`); several causes may share one.
    resource: str
    scope: Scope
    doc: str  # what the cause is, in words
    advice: str  # what to change, in words (the summary says it with the run's numbers)
    saturates: str | None  # the resource in words; None: nothing saturated (a tier's time)
    # What it reads of verdict.json: `tiers.<key>`, `resources.<key>` (`host.`, `generator.`),
    # `endpoints.<key>`, `pools`, or a step's own `<key>`.
    reads: tuple[str, ...]
    thresholds: tuple[str, ...]  # the names in analyze/thresholds.py it judges by
    needs_cpu: bool  # a busy host can be what makes it grow
    find: Callable[[Ask], Finding | None] | None = None  # scope `tier`
    judge: Callable[[RunAsk], Judged | None] | None = None  # scope `run` and `beside`
    # A finding of it is about a tier that computes: the profiled step's hot code is evidence.
    computes: bool = False
    database: DatabaseInside | None = None
    # The throughput after the change its advice names: (component, answered steps, stack).
    predict: Callable[[str, list[StepJson], Context], Prediction | None] | None = None
    # What a request served one at a time makes of its tier (a pool it fills, its time):
    # an effect of a serialized request, not its cause (causes/serialized.py).
    effect_of_one_at_a_time: bool = False

    def __post_init__(self) -> None:
        asked = {"tier": self.find, "run": self.judge, "beside": self.judge}.get(self.scope)
        if self.scope != "within" and asked is None:
            raise ValueError(f"cause {self.name!r}: scope {self.scope!r} needs its function")
