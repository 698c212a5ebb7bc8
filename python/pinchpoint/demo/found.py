"""The demo stack described as `pinchpoint init` finds it: the round trip from a running
stack to a plan, shown on every demo."""

from __future__ import annotations

from typing import Any

from pinchpoint.discover.init import init_plan
from pinchpoint.plan.model import parse_plan


def found_components(url: str, expected: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The components `init` finds serving `url`, as the plan's tables, and a line saying
    so; the stack's own description, and why, when init did not find every tier of it."""
    text, found = init_plan(url)
    components = [
        c.model_dump(include={"name", "role", "calls", "log", "process"}, exclude_none=True)
        for c in parse_plan(text, "the plan init wrote").component
    ]
    names = [c["name"] for c in components]
    wanted = [c["name"] for c in expected]
    if names != wanted:
        missing = "; ".join(found.problems) or f"found {names or 'nothing'}"
        return expected, f"init found {missing}, not {wanted}: the demo's own description is used"
    return components, f"Tiers found by `pinchpoint init`: {' → '.join(names)}"
