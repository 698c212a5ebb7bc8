"""The effect of the change a bottleneck's advice names, where a number says it: the cause
that names the bottleneck's resource predicts it (analyze/ceilings.py holds the model)."""

from __future__ import annotations

from typing import Any

from pinchpoint.analyze.causes import CAUSES
from pinchpoint.analyze.ceilings import Prediction, closed_loop_rate
from pinchpoint.analyze.context import Context
from pinchpoint.rundir.shapes import StepJson

__all__ = ["Prediction", "closed_loop_rate", "predict"]


def predict(bottleneck: dict[str, Any], steps: list[StepJson], ctx: Context) -> Prediction | None:
    """The throughput after the change the bottleneck's advice names (a pool's workers or
    processes, a cgroup's CPU quota, a pool of connections); None for the others."""
    answered = [s for s in steps if s["throughput_rps"] > 0]
    component = bottleneck.get("component")
    if not answered or component is None:
        return None
    cause = CAUSES.behind(str(bottleneck.get("resource")))
    predictor = cause.predict if cause is not None else None
    return predictor(str(component), answered, ctx) if predictor is not None else None
