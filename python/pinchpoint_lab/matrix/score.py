"""A verdict against its scenario's truth, and the accuracy of many.

A verdict is right when it names the truth's resource and component (and the named
request, for a truth that has one). Where a heavy neighbour may leave the host too busy
for any verdict (truth.refusal_ok), one that refuses to name a limit of the stack is a
refusal: neither right nor wrong, counted apart.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from pinchpoint_lab.matrix.spec import Spec, Truth


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
    # Whether processes outside the stack took CPU: a hog beside it, or the ones that
    # starve the generator.
    neighbour_expected: bool = False
    # The named request the verdict put the limit on.
    request: str | None = None
    # The verdict refused to name a limit where the truth allows it.
    refused: bool = False

    @property
    def resource_ok(self) -> bool:
        return self.resource == self.truth.resource

    @property
    def component_ok(self) -> bool:
        return self.component == self.truth.component

    @property
    def request_ok(self) -> bool:
        return self.truth.request is None or self.request == self.truth.request

    @property
    def right(self) -> bool:
        return self.resource_ok and self.component_ok and self.request_ok

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


# What a verdict's headline says when it names no limit because the host was too busy:
# the generator measured itself, or processes outside the stack took the CPU.
REFUSALS = ("generator", "too busy", "took the host's cpu")


def refuses(verdict: dict[str, Any]) -> bool:
    """The verdict names the generator, or no limit because the host was too busy."""
    b = verdict.get("bottleneck")
    if b:
        return b.get("component") == "generator"
    headline = str(verdict.get("headline", "")).lower()
    return any(words in headline for words in REFUSALS)


def judge(spec: Spec, verdict: dict, noisy: bool, names: dict[str, str] | None = None) -> Outcome:
    """The verdict against the scenario's truth; `names`: the truth's component by the
    name the plan's components give it (a plan init wrote names servers for what they are)."""
    b = verdict.get("bottleneck") or {}
    neighbour = any(f["component"] == "neighbours" for f in verdict.get("findings") or [])
    truth = spec.expected(noisy)
    if names and truth.component in names:
        truth = replace(truth, component=names[truth.component])
    outcome = Outcome(
        spec.name,
        spec.cls,
        noisy,
        truth,
        component=b.get("component"),
        resource=b.get("resource"),
        starts_at_users=b.get("starts_at_users"),
        headline=verdict.get("headline", ""),
        neighbour_reported=neighbour,
        neighbour_expected=noisy or spec.starved,
        request=b.get("request"),
    )
    if truth.refusal_ok and not outcome.right and refuses(verdict):
        return replace(outcome, refused=True)
    return outcome


def label(component: str | None, resource: str | None) -> str:
    return "none" if resource is None else f"{component}:{resource}"


def accuracy_table(outcomes: list[tuple[Outcome, list[int]]]) -> list[dict]:
    """Per class and in all: scenarios, refusals, and over the others resource right,
    component right, both (and the named request), start within one step (None where
    every scenario was refused)."""
    rows = []
    classes = sorted({o.cls for o, _ in outcomes})
    for cls in [*classes, "all"]:
        part = [(o, lv) for o, lv in outcomes if cls in ("all", o.cls)]
        judged = [(o, lv) for o, lv in part if not o.refused]
        rows.append(
            {
                "class": cls,
                "n": len(part),
                "refused": len(part) - len(judged),
                "resource": _share([o.resource_ok for o, _ in judged]),
                "component": _share([o.component_ok for o, _ in judged]),
                "right": _share([o.right for o, _ in judged]),
                "start": _share([o.start_ok(lv) for o, lv in judged]),
            }
        )
    return rows


def _share(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def confusion(outcomes: list[Outcome]) -> Counter[tuple[str, str]]:
    """How often each true resource was named as each resource (or refused)."""
    return Counter(
        (o.truth.resource or "none", "refused" if o.refused else o.resource or "none")
        for o in outcomes
    )
