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
