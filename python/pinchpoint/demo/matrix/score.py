"""A verdict against its scenario's truth, and the accuracy of many."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pinchpoint.demo.matrix.spec import Spec, Truth


@dataclass(frozen=True)
class Outcome:
    """One scenario's verdict, judged."""

    name: str
    cls: str
    noisy: bool
    truth: Truth
    component: str | None
    resource: str | None
    starts_at_users: int | None
    headline: str
    # A neighbour reported as a finding of its own: right with a neighbour, wrong without.
    neighbour_reported: bool = False

    @property
    def resource_ok(self) -> bool:
        return self.resource == self.truth.resource

    @property
    def component_ok(self) -> bool:
        return self.component == self.truth.component

    @property
    def right(self) -> bool:
        return self.resource_ok and self.component_ok

    # Whether processes outside the stack took CPU: a hog beside it, or the ones that
    # starve the generator.
    neighbour_expected: bool = False

    @property
    def neighbour_ok(self) -> bool:
        return self.neighbour_reported == self.neighbour_expected

    @property
    def false_bottleneck(self) -> bool:
        return self.truth.resource is None and self.resource is not None

    def start_ok(self, levels: list[int]) -> bool:
        """The start within one step of the truth's (trivially so without a bottleneck)."""
        if self.truth.starts_at_users is None or self.starts_at_users is None:
            return self.truth.starts_at_users == self.starts_at_users
        if self.truth.starts_at_users not in levels or self.starts_at_users not in levels:
            return abs(self.truth.starts_at_users - self.starts_at_users) <= levels[1] - levels[0]
        return (
            abs(levels.index(self.truth.starts_at_users) - levels.index(self.starts_at_users)) <= 1
        )


def judge(spec: Spec, verdict: dict, noisy: bool) -> Outcome:
    b = verdict.get("bottleneck") or {}
    neighbour = any(f["component"] == "neighbours" for f in verdict.get("findings") or [])
    return Outcome(
        spec.name,
        spec.cls,
        noisy,
        spec.expected(noisy),
        b.get("component"),
        b.get("resource"),
        b.get("starts_at_users"),
        verdict.get("headline", ""),
        neighbour,
        noisy or spec.starved,
    )


def label(component: str | None, resource: str | None) -> str:
    return "none" if resource is None else f"{component}:{resource}"


def accuracy_table(outcomes: list[tuple[Outcome, list[int]]]) -> list[dict]:
    """Per class and in all: scenarios, resource right, component right, both, start
    within one step."""
    rows = []
    classes = sorted({o.cls for o, _ in outcomes})
    for cls in [*classes, "all"]:
        part = [(o, lv) for o, lv in outcomes if cls in ("all", o.cls)]
        n = len(part)
        rows.append(
            {
                "class": cls,
                "n": n,
                "resource": sum(o.resource_ok for o, _ in part) / n,
                "component": sum(o.component_ok for o, _ in part) / n,
                "right": sum(o.right for o, _ in part) / n,
                "start": sum(o.start_ok(lv) for o, lv in part) / n,
            }
        )
    return rows


def confusion(outcomes: list[Outcome]) -> Counter[tuple[str, str]]:
    """How often each true resource was named as each resource."""
    return Counter((o.truth.resource or "none", o.resource or "none") for o in outcomes)
