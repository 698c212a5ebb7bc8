"""A host gauge that rose with the load: high at the heaviest steps and clearly higher than
at the lightest (a disk busy before the load came is not what the load ran into)."""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.analyze.context import resource_of
from pinchpoint.rundir.shapes import StepJson

HOST = "host"


@dataclass
class Rise:
    """A gauge that reached `level` from `onset` on, peaking at `peak`, from `base`."""

    onset: StepJson
    peak: float
    peak_step: StepJson
    base: float


def rise(steps: list[StepJson], who: str, key: str, level: float, by: float) -> Rise | None:
    """The gauge's rise, when it reaches `level` and gains at least `by` over the run."""
    values = [(s, resource_of(s, who, key)) for s in steps]
    measured = [(s, v) for s, v in values if v is not None]
    if len(measured) < 2:
        return None
    base = measured[0][1]
    peak_step, peak = max(measured, key=lambda m: m[1])
    if peak < level or peak - base < by:
        return None
    onset = next(s for s, v in measured if v >= level)
    return Rise(onset, peak, peak_step, base)


def pct(share: float) -> str:
    return f"{100 * share:.0f}%"
