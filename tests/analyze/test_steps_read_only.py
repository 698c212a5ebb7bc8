"""Nothing in the analysis writes into a step once built: the verdict's rules, the stack's
pools, the prediction, the usage table and the curve read steps made read-only all
through (each map a mappingproxy, each list a tuple) and find what they find on the
steps as built."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import pytest

from pinchpoint.analyze import _curve, stack_context
from pinchpoint.analyze.database.samples import lock_wait_marks
from pinchpoint.analyze.prediction import predict
from pinchpoint.analyze.redis import main_thread_marks
from pinchpoint.analyze.run_input import read_input
from pinchpoint.analyze.steps import step_table
from pinchpoint.analyze.usage import usage_table
from pinchpoint.analyze.verdict import decide
from pinchpoint.rundir.shapes import StepJson
from pinchpoint.rundir.view import as_view

RUNS = Path(__file__).parent.parent / "data" / "runs"


def read_only(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: read_only(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(read_only(v) for v in value)
    return value


# A worker pool, a database's CPU, a request's own time, Redis's one core.
@pytest.mark.parametrize(
    "name", ["demo-pool2", "db-scan-pool", "journey-search-db-sync", "redis-core"]
)
def test_the_analysis_finds_the_same_on_steps_it_cannot_write(tmp_path: Path, name: str) -> None:
    shutil.copytree(RUNS / name, tmp_path / name)
    view = as_view(tmp_path / name)
    data = read_input(view)
    steps = step_table(data, main_thread_marks(view), lock_wait_marks(view))
    frozen = cast(list[StepJson], [read_only(s) for s in steps])
    tier = next(iter(steps[-1]["tiers"]))
    # As the type checker refuses it (StepJson and TierJson are ReadOnly), so does the step.
    with pytest.raises(TypeError):
        frozen[-1]["tiers"][tier]["count"] = 0  # type: ignore[typeddict-readonly-mutated]

    ctx = stack_context(data, frozen)
    assert ctx == stack_context(data, steps)
    decision = decide(frozen, ctx)
    assert decision == decide(steps, ctx)
    assert decision["bottleneck"] is not None
    found = predict(decision["bottleneck"], frozen, ctx)
    assert found == predict(decision["bottleneck"], steps, ctx)
    assert [usage_table(s, ctx) for s in frozen] == [usage_table(s, ctx) for s in steps]
    assert _curve(frozen) == _curve(steps)
