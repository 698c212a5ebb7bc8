"""Processes outside the stack and the generator that took a good share of the host's CPU:
a finding of their own, beside whatever limits the stack."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause, Finding, Judged, RunAsk
from pinchpoint.analyze.context import Context, load_text, rate_of
from pinchpoint.analyze.thresholds import NEIGHBOUR_CONFIDENCE, NEIGHBOUR_SHARE
from pinchpoint.analyze.usage import host_use
from pinchpoint.rundir.shapes import StepJson


def neighbour_finding(steps: list[StepJson], ctx: Context) -> Finding | None:
    """Processes outside the stack and the generator that took a good share of the CPU."""
    hosts = [host_use(s, ctx) for s in steps]
    measured = [(h, s) for h, s in zip(hosts, steps, strict=True) if h.busy is not None]
    if not measured:
        return None
    h, step = max(measured, key=lambda m: m[0].neighbours)
    if h.neighbours <= NEIGHBOUR_SHARE * ctx.cpu_count:
        return None
    mean = sum(m[0].neighbours for m in measured) / len(measured)
    waits = [
        f"{name} waited for a core {w:.2f} cores' worth"
        for name, w in sorted(_waits(step).items(), key=lambda item: (-item[1], item[0]))
        if w >= 0.05
    ]
    evidence = [
        f"processes outside the stack used {h.neighbours:.2f} of {ctx.cpu_count} cores at "
        f"{load_text(step)} ({mean:.2f} on average over the run), while the stack used "
        f"{h.stack:.2f} and the generator {h.generator:.2f}",
        *waits,
    ]
    summary = (
        f"Other processes on this host used up to {h.neighbours:.2f} of its {ctx.cpu_count} cores "
        "during the run: the stack had that much less CPU, and its tiers waited for a core. "
        + NEIGHBOURS.advice
    )
    return Finding(
        "neighbours", NEIGHBOURS, step["users"], evidence,
        f"processes outside the stack ({h.neighbours:.2f} cores)", summary, rate_of(step),
    )  # fmt: skip


def _waits(step: StepJson) -> dict[str, float]:
    return {
        name: float(r["cpu_wait_cores"])
        for name, r in step.get("resources", {}).items()
        if r.get("cpu_wait_cores") is not None and name != "host"
    }


def _judge_neighbours(ask: RunAsk) -> Judged | None:
    found = neighbour_finding(ask.steps, ask.ctx)
    return Judged(found, NEIGHBOUR_CONFIDENCE) if found is not None else None


# Asked of the whole run; it explains a tier's growth only where that tier's work needs a
# core (verdict.py).
NEIGHBOURS = Cause(
    name="neighbours",
    resource="cpu",
    scope="beside",
    doc=__doc__,
    advice=(
        "Run the test on a quiet host, or pin the neighbours elsewhere, before trusting "
        "CPU-bound numbers."
    ),
    saturates="the host's cores, taken by processes outside the stack",
    reads=(
        "host.cpu_cores",
        "resources.cpu_cores",
        "resources.cpu_wait_cores",
        "generator.cpu_cores",
        "host.cpu_nice_cores",
        "host.cpu_pressure",
        "generator.cpu_wait_cores",
        "host.cpu_wait_cores",
    ),
    thresholds=("NEIGHBOUR_SHARE", "NEIGHBOUR_CONFIDENCE"),
    needs_cpu=True,
    judge=_judge_neighbours,
    computes=True,
    database="statements",
    effect_of_one_at_a_time=True,
)
