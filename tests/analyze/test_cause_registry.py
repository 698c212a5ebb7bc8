"""The verdict's causes: one typed unit to a module under one registry, each with a name of
its own, every resource the verdict can name owned by a cause, the thresholds and the keys
of verdict.json each declares being what it judges by and reads, and a neighbour's CPU
allowed to explain only what needs a core."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
from pathlib import Path

import pytest

from pinchpoint.analyze import thresholds
from pinchpoint.analyze.causes import CAUSES, Cause, Registry

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "verdict.schema.json"


def test_every_resource_the_verdict_names_has_a_cause() -> None:
    named = json.loads(SCHEMA.read_text())["$defs"]["bottleneck"]["properties"]["resource"]["enum"]
    assert set(named) == {c.resource for c in CAUSES}


def test_each_cause_has_a_name_of_its_own() -> None:
    names = [c.name for c in CAUSES]
    assert len(names) == len(set(names))
    assert CAUSES.named("one_core").resource == "cpu"
    with pytest.raises(ValueError, match="named more than once: worker_pool"):
        Registry((*CAUSES.causes, dataclasses.replace(CAUSES.named("worker_pool"))))
    with pytest.raises(KeyError, match="no cause named 'redis_pool'"):
        CAUSES.named("redis_pool")


def test_the_run_is_asked_before_its_tiers_and_each_cause_can_be() -> None:
    assert [c.name for c in CAUSES.asked("run")] == ["generator", "refused", "serialized"]
    assert all(c.judge is not None for c in (*CAUSES.asked("run"), *CAUSES.asked("beside")))
    assert all(c.find is not None for c in CAUSES.asked("tier"))
    with pytest.raises(ValueError, match="cause 'x': scope 'tier' needs its function"):
        dataclasses.replace(CAUSES.named("disk"), name="x", find=None)


def test_tier_causes_are_asked_in_the_registry_order() -> None:
    # Causes that fill pools come before the pool itself, the pool before a ceiling no
    # gauge shows, and the tier's own time, which always answers, last.
    order = [c.name for c in CAUSES.asked("tier")]
    for cause in ("proxy_queue", "cpu_quota", "db_lock", "callee", "connection_pool"):
        assert order.index(cause) < order.index("worker_pool"), cause
    assert order[-3:] == ["flat_bytes", "one_core", "time"]


def test_only_causes_that_compute_can_be_explained_by_a_busy_host() -> None:
    waits = (
        "worker_pool",
        "callee",
        "callee_pool",
        "connection_pool",
        "db_lock",
        "cpu_quota",
        "proxy_queue",
        "refused",
        "link",
        "flat_bytes",
        "serialized",
        "disk",
    )
    assert not any(CAUSES.named(n).needs_cpu for n in waits)
    time = CAUSES.named("time")
    assert time.needs_cpu and time.saturates is None
    assert [c.name for c in CAUSES if c.saturates is None] == ["time"]


def test_causes_a_resource_shows_agree_on_what_follows_the_decision() -> None:
    """Hot code, the database's inside and the advice's prediction are added to verdict.json
    by its resource: the causes that share one must ask for the same."""
    for resource in {c.resource for c in CAUSES}:
        shown = CAUSES.showing(resource)
        kept = {(c.computes, c.database, c.predict, c.needs_cpu) for c in shown}
        assert len(kept) == 1, (resource, [c.name for c in shown])
    assert CAUSES.behind("db_lock") is CAUSES.named("db_lock")
    assert CAUSES.behind("cpu") is not None and CAUSES.behind("cpu").database == "statements"
    assert CAUSES.behind("redis_pool") is None


def _function(cause: Cause) -> object:
    return cause.find or cause.judge


def test_each_cause_lives_in_a_module_of_its_own() -> None:
    asked = [c for c in CAUSES if _function(c) is not None]
    modules = [getattr(_function(c), "__module__", None) for c in asked]
    assert len(modules) == len(set(modules))
    assert all(m is not None and m.startswith("pinchpoint.analyze.causes.") for m in modules)


def test_each_cause_says_what_it_is_and_what_to_change() -> None:
    for cause in CAUSES:
        assert len(cause.doc.split()) >= 8, cause.name
        assert cause.advice.endswith("."), cause.name


def _source_around(module_name: str) -> str:
    """A module's source and that of the analysis's modules it imports from."""
    module = importlib.import_module(module_name)
    source = inspect.getsource(module)
    texts = [source]
    for node in ast.walk(ast.parse(source)):
        name = node.module or "" if isinstance(node, ast.ImportFrom) else ""
        if name.startswith("pinchpoint.analyze.") and name != "pinchpoint.analyze.thresholds":
            texts.append(inspect.getsource(importlib.import_module(name)))
    return "\n".join(texts)


def test_each_threshold_a_cause_declares_is_one_it_judges_by() -> None:
    for cause in CAUSES:
        module = cause.find or cause.judge
        where = getattr(module, "__module__", None) or _module_of(cause)
        around = _source_around(where)
        for name in cause.thresholds:
            assert isinstance(getattr(thresholds, name, None), int | float), (cause.name, name)
            assert name in around, (cause.name, name)


def _module_of(cause: Cause) -> str:
    """The module that defines a cause asked by another's function."""
    for name in ("cpu", "event_loop", "wait_chain"):
        module = importlib.import_module(f"pinchpoint.analyze.causes.{name}")
        if any(value is cause for value in vars(module).values()):
            return module.__name__
    raise AssertionError(cause.name)


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
    undeclared = {(c.name, r) for c in CAUSES for r in c.reads if not _declared(r, schema)}
    assert undeclared == set()
    assert _declared("tiers.queue_p50_ms", schema)
    assert not _declared("tiers.queue_p51_ms", schema)
    assert not _declared("endpoints.tiers", schema), "a request's tiers are per step"
