"""Each cause reads of a step no more than its `reads` declares: asked of every tier of
recorded runs, on steps (and pools, and named requests) whose undeclared keys raise when
read, no cause reads one."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pinchpoint.analyze import stack_context
from pinchpoint.analyze.causes import CAUSES, Ask, Cause, RunAsk
from pinchpoint.analyze.causes.generator import generator_check
from pinchpoint.analyze.context import Context
from pinchpoint.analyze.run_input import read_input
from pinchpoint.analyze.steps import step_table
from pinchpoint.analyze.usage import process_group
from pinchpoint.rundir.view import as_view

DATA = Path(__file__).parent.parent / "data" / "runs"
RUNS = ("demo-pool2", "demo-cpu24", "db-scan-pool", "journey-search-db-gthread")
# What every step says of its load and latency, which the decision reads of any step.
LOAD = ("step", "users", "kind", "level", "latency_ms", "throughput_rps", "latency_mean_ms")


class UndeclaredRead(AssertionError):
    pass


class _Guarded(dict[str, Any]):
    """A mapping whose keys may be read only where `allowed(place.key)` says so."""

    def __init__(self, data: dict[str, Any], place: str, allowed: Callable[[str], bool]):
        super().__init__(data)
        self.place, self.allowed = place, allowed

    def _check(self, key: str) -> None:
        path = f"{self.place}.{key}" if self.place else key
        if not self.allowed(path):
            raise UndeclaredRead(path)

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)


def _allowed(reads: tuple[str, ...]) -> Callable[[str], bool]:
    def allowed(path: str) -> bool:
        return path in LOAD or any(
            r == path or r.startswith(path + ".") or path.startswith(r + ".") for r in reads
        )

    return allowed


def _named(data: dict[str, Any], kind: Callable[[str], str], allowed: Callable[[str], bool]) -> Any:
    """A map of tiers or components by name: any name may be looked up, not its keys."""
    guarded = {name: _Guarded(value, kind(name), allowed) for name, value in data.items()}
    return dict(guarded)


def _step(step: dict[str, Any], allowed: Callable[[str], bool]) -> _Guarded:
    kinds = {"host": "host", "generator": "generator"}
    inner = dict(step)
    inner["tiers"] = _named(step.get("tiers") or {}, lambda _: "tiers", allowed)
    inner["resources"] = _named(
        step.get("resources") or {}, lambda name: kinds.get(name, "resources"), allowed
    )
    view = _Guarded(inner, "", lambda path: path in ("tiers", "resources") or allowed(path))
    return view


def _endpoint(entry: dict[str, Any], allowed: Callable[[str], bool]) -> _Guarded:
    steps = [_Guarded(s, "endpoints.steps", allowed) for s in entry.get("steps") or []]
    return _Guarded({**entry, "steps": steps}, "endpoints", allowed)


def _guarded(cause: Cause, steps: list[dict], ctx: Context) -> tuple[list[dict], Context]:
    allowed = _allowed(cause.reads)
    pools: Any = ctx.pools if "pools" in cause.reads else _Guarded(ctx.pools, "pools", allowed)
    guarded = dataclasses.replace(
        ctx, pools=pools, endpoints=[_endpoint(e, allowed) for e in ctx.endpoints]
    )
    return [_step(s, allowed) for s in steps], guarded


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, list[dict], Context]]:
    built = []
    for name in RUNS:
        folder = tmp_path_factory.mktemp(name)
        shutil.copytree(DATA / name, folder, dirs_exist_ok=True)
        data = read_input(as_view(folder))
        steps = [s for s in step_table(data) if s["latency_ms"]["p50"] is not None]
        built.append((name, steps, stack_context(data, steps)))
    return built


@pytest.mark.parametrize("cause", CAUSES.asked("tier"), ids=lambda c: c.name)
def test_a_tier_cause_reads_only_what_it_declares(cause: Cause, runs: list) -> None:
    assert cause.find is not None
    for name, steps, ctx in runs:
        mine, guarded = _guarded(cause, steps, ctx)
        estimate = {
            "endpoint": "all requests",
            "workers": 2.0,
            "peak_throughput_rps": 100.0,
            "min_latency_ms": 10.0,
        }
        for tier in ctx.order:
            group = process_group(tier, steps, ctx)
            ask = Ask(tier, mine, mine[len(mine) // 2], guarded, estimate, group)
            try:
                cause.find(ask)
            except UndeclaredRead as read:
                pytest.fail(f"{cause.name} read {read} of {name}'s {tier}, undeclared")


@pytest.mark.parametrize(
    "cause", [*CAUSES.asked("run"), *CAUSES.asked("beside")], ids=lambda c: c.name
)
def test_a_run_cause_reads_only_what_it_declares(cause: Cause, runs: list) -> None:
    assert cause.judge is not None
    for name, steps, ctx in runs:
        mine, guarded = _guarded(cause, steps, ctx)
        ask = RunAsk(mine, guarded, generator_check(steps, ctx), CAUSES.tier_finding)
        try:
            cause.judge(ask)
        except UndeclaredRead as read:
            pytest.fail(f"{cause.name} read {read} of {name}, undeclared")


def test_an_undeclared_read_raises() -> None:
    step = _step({"users": 1, "tiers": {"app": {"p50_ms": 3.0, "concurrency": 1.0}}},
                 _allowed(("tiers.p50_ms",)))  # fmt: skip
    assert step["tiers"]["app"]["p50_ms"] == 3.0
    with pytest.raises(UndeclaredRead, match=r"^tiers\.concurrency$"):
        step["tiers"]["app"].get("concurrency")
    with pytest.raises(UndeclaredRead, match=r"^errors$"):
        step.get("errors", 0)
