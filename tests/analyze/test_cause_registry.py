"""The verdict's causes: one typed unit to a module under one registry, every resource the
verdict can name owned by a cause, and a neighbour's CPU allowed to explain only what needs
a core."""

from __future__ import annotations

import json
from pathlib import Path

from pinchpoint.analyze.causes import CAUSES, TIER_CAUSES, cause_of

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "verdict.schema.json"


def test_every_resource_the_verdict_names_has_a_cause() -> None:
    named = json.loads(SCHEMA.read_text())["$defs"]["bottleneck"]["properties"]["resource"]["enum"]
    assert set(named) == {c.resource for c in CAUSES}


def test_tier_causes_are_asked_in_the_registry_order_and_each_can_be() -> None:
    assert all(c.find is not None for c in TIER_CAUSES)
    # Causes that fill pools come before the pool itself, and the pool before a ceiling no
    # gauge shows.
    order = [c.resource for c in TIER_CAUSES]
    assert order.index("cpu_quota") < order.index("worker_pool")
    assert order.index("db_lock") < order.index("worker_pool")
    # A callee's workers are asked first, the tier's own workers (the pool) last.
    pool = max(i for i, resource in enumerate(order) if resource == "worker_pool")
    assert order.index("connection_pool") < pool
    assert order[-1] == "bandwidth"


def test_only_causes_that_compute_can_be_explained_by_a_busy_host() -> None:
    waits = (
        "worker_pool",
        "connection_pool",
        "db_lock",
        "cpu_quota",
        "proxy_limit",
        "bandwidth",
        "serialized",
        "disk",
    )
    assert not any(cause_of(r).needs_cpu for r in waits)
    assert cause_of("time").needs_cpu and cause_of("time").saturates is None


def test_each_cause_lives_in_a_module_of_its_own() -> None:
    modules = [c.find.__module__ for c in TIER_CAUSES if c.find is not None]
    assert len(modules) == len(set(modules))


# Where in verdict.json each cause's `reads` entry points: a step's tier (`tiers.`), a
# step's component, host or generator (`resources.`, `host.`, `generator.`), the run's
# requests (`endpoints.`) or pools (`pools`); a bare key is a step's own. `*` is any key
# of a map (a tier's or a component's name).
_PLACES = {
    "tiers": ["steps", "tiers", "*"],
    "resources": ["steps", "resources", "*"],
    "host": ["steps", "resources", "*"],
    "generator": ["steps", "resources", "*"],
    "endpoints": ["endpoints"],
    "pools": ["pools"],
}


def _declared(path: str, schema: dict) -> bool:
    """Whether verdict.schema.json declares the key a cause's `reads` entry names."""
    first, *rest = path.split(".")
    names = [*_PLACES[first], *rest] if first in _PLACES else ["steps", first]
    node = schema
    for name in names:
        while "$ref" in node or node.get("type") == "array":
            ref = node.get("$ref")
            node = schema["$defs"][ref.split("/")[-1]] if ref else node["items"]
        if name == "*":
            node = node.get("additionalProperties")
        else:
            node = (node.get("properties") or {}).get(name)
        if not isinstance(node, dict):
            return False
    return True


def test_every_key_a_cause_reads_is_one_the_verdict_declares() -> None:
    schema = json.loads(SCHEMA.read_text())
    undeclared = {(c.resource, r) for c in CAUSES for r in c.reads if not _declared(r, schema)}
    assert undeclared == set()
    assert _declared("tiers.queue_p50_ms", schema)
    assert not _declared("tiers.queue_p51_ms", schema)
    assert not _declared("endpoints.tiers", schema), "a request's tiers are per step"
