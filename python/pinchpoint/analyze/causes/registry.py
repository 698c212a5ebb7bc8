"""The causes in the order the verdict asks them, and what the decision's stages look up
in them: a cause by its unique name, the causes asked of the run or of a tier, and what a
finding that users see by its resource alone leads to."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding, Scope
from pinchpoint.analyze.context import Context
from pinchpoint.analyze.usage import process_group
from pinchpoint.rundir.shapes import StepJson


@dataclass(frozen=True)
class Registry:
    causes: tuple[Cause, ...]

    def __post_init__(self) -> None:
        names = [c.name for c in self.causes]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"causes named more than once: {', '.join(twice)}")

    def __iter__(self) -> Iterator[Cause]:
        return iter(self.causes)

    def asked(self, scope: Scope) -> tuple[Cause, ...]:
        """The causes of one scope, in the registry's order."""
        return tuple(c for c in self.causes if c.scope == scope)

    def named(self, name: str) -> Cause:
        """The cause of this unique name."""
        for cause in self.causes:
            if cause.name == name:
                return cause
        raise KeyError(f"no cause named {name!r}")

    def showing(self, resource: str) -> tuple[Cause, ...]:
        """The causes whose findings users see under this resource (verdict.json's)."""
        return tuple(c for c in self.causes if c.resource == resource)

    def behind(self, resource: str) -> Cause | None:
        """A cause verdict.json shows under this resource, for the stages after the decision
        that see only the resource: the causes that share one ask for the same hot code,
        database inside and prediction (tests/analyze/test_cause_registry.py holds them to
        it)."""
        shown = self.showing(resource)
        return shown[0] if shown else None

    def tier_finding(
        self,
        tier: str,
        steps: list[StepJson],
        onset: StepJson,
        ctx: Context,
        estimate: dict[str, Any] | None,
    ) -> Finding:
        """The resource behind a tier's growing time: the first tier cause that fires (the
        tier's own time, asked last, always does)."""
        ask = Ask(tier, steps, onset, ctx, estimate, process_group(tier, steps, ctx))
        for cause in self.asked("tier"):
            assert cause.find is not None
            found = cause.find(ask)
            if found is not None:
                return found
        raise LookupError(f"no cause named what limits {tier}: the last tier cause must fire")

    def adding(self, cause: Cause, before: str) -> Registry:
        """These causes with one more, asked just before the cause named `before`."""
        at = self.causes.index(self.named(before))
        return Registry((*self.causes[:at], cause, *self.causes[at:]))
