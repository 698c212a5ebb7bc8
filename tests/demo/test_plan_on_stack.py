"""`pinchpoint demo --plan`: a plan's text pointed at the demo stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.demo.plan import plan_on_stack
from pinchpoint.plan.model import parse_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop_flow.toml"
COMPONENTS = [{"name": "nginx", "role": "proxy", "calls": ["app"]}, {"name": "app", "calls": []}]


def test_the_example_flow_is_pointed_at_the_stack_with_its_components() -> None:
    text = plan_on_stack(EXAMPLE.read_text(), "http://127.0.0.1:4567", COMPONENTS, "shop.toml")
    plan = parse_plan(text, "shop.toml")
    assert plan.target.url == "http://127.0.0.1:4567"
    assert [c.name for c in plan.component] == ["nginx", "app"]
    assert plan.endpoints() == ["shop/login", "shop/orders", "shop/detail", "shop/note"]


def test_a_plan_without_a_target_url_or_with_its_own_components_is_refused() -> None:
    with pytest.raises(ValueError, match=r"x.toml: no url"):
        plan_on_stack('[load]\nusers = 1\n[target]\nname = "x"\n', "http://h:1", [], "x.toml")
    own = EXAMPLE.read_text() + '\n[[component]]\nname = "db"\n'
    with pytest.raises(ValueError, match=r"x.toml: the demo stack brings its own"):
        plan_on_stack(own, "http://h:1", [], "x.toml")
