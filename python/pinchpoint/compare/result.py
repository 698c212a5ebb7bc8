"""The comparison of two sides: numbers first, wording in `verdict`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from pinchpoint.compare.sides import Side
from pinchpoint.compare.stats import (
    ALPHA,
    CONFIDENCE,
    INTERVAL_PERCENTILES,
    LADDER,
    bootstrap_interval,
    mann_whitney_p,
    percentile,
    share_slower,
)

US_PER_MS = 1000.0
UNRESOLVED = "too few requests on one side to resolve this percentile: there it is the slowest"


@dataclass
class SideSummary:
    label: str
    path: str
    requests: int
    used: int  # successful requests, the ones compared
    excluded: int
    mean_ms: float
    min_ms: float
    max_ms: float
    sla_error_rate: float | None  # share of the compared requests slower than the SLA


@dataclass
class LadderRow:
    label: str  # "p99.9"
    q: float
    a_ms: float
    b_ms: float
    ratio: float | None  # b / a; None when a is 0
    resolved: bool = True  # False when a side has too few requests: then it is its max


@dataclass
class IntervalRow:
    label: str
    q: float
    a_ms: float
    a_low_ms: float
    a_high_ms: float
    b_ms: float
    b_low_ms: float
    b_high_ms: float
    overlap: bool


@dataclass
class ComparisonResult:
    a: SideSummary
    b: SideSummary
    ladder: list[LadderRow]
    intervals: list[IntervalRow]
    sla_ms: float | None
    mann_whitney_p: float
    distributions_differ: bool  # Mann–Whitney p below ALPHA
    p99_change: float  # b / a - 1 at p99
    p99_significant: bool  # the p99 confidence intervals do not overlap
    verdict: str
    confidence: float = CONFIDENCE
    alpha: float = ALPHA
    html: Path | None = None
    sides: tuple[Side, Side] | None = field(default=None, repr=False)  # for the charts

    def row(self, label: str) -> LadderRow:
        return next(r for r in self.ladder if r.label == label)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the raw latencies, JSON-ready."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sides"}
        data["a"], data["b"] = asdict(self.a), asdict(self.b)
        data["ladder"] = [asdict(r) for r in self.ladder]
        data["intervals"] = [asdict(i) for i in self.intervals]
        data["html"] = str(self.html) if self.html else None
        return data


def label(q: float) -> str:
    return f"p{q:g}"


def build(a: Side, b: Side, sla_ms: float | None, seed: int = 0) -> ComparisonResult:
    """Compare b against a. The bootstrap uses `seed`, so a comparison repeats exactly."""
    for side, name in ((a, "A"), (b, "B")):
        if side.used == 0:
            raise ValueError(
                f"{name} ({side.path}): no successful requests to compare "
                f"({side.requests} requests, all failed)"
            )
    sorted_a = np.sort(a.latency_us)
    sorted_b = np.sort(b.latency_us)
    ladder = []
    fewest = min(a.used, b.used)
    for q in LADDER:
        va, vb = percentile(sorted_a, q), percentile(sorted_b, q)
        resolved = fewest * (1 - q / 100) >= 1 - 1e-9
        ladder.append(
            LadderRow(
                label(q), q, va / US_PER_MS, vb / US_PER_MS, vb / va if va else None, resolved
            )
        )
    rng = np.random.default_rng(seed)
    intervals = []
    for q in INTERVAL_PERCENTILES:
        a_low, a_high = bootstrap_interval(sorted_a, q, rng)
        b_low, b_high = bootstrap_interval(sorted_b, q, rng)
        intervals.append(
            IntervalRow(
                label=label(q),
                q=q,
                a_ms=percentile(sorted_a, q) / US_PER_MS,
                a_low_ms=a_low / US_PER_MS,
                a_high_ms=a_high / US_PER_MS,
                b_ms=percentile(sorted_b, q) / US_PER_MS,
                b_low_ms=b_low / US_PER_MS,
                b_high_ms=b_high / US_PER_MS,
                overlap=a_low <= b_high and b_low <= a_high,
            )
        )
    p_value = mann_whitney_p(a.latency_us, b.latency_us)
    p99 = next(r for r in ladder if r.label == "p99")
    p99_interval = next(i for i in intervals if i.label == "p99")
    change = p99.b_ms / p99.a_ms - 1 if p99.a_ms else (0.0 if p99.b_ms == 0 else float("inf"))
    result = ComparisonResult(
        a=_summary(a, sorted_a, sla_ms),
        b=_summary(b, sorted_b, sla_ms),
        ladder=ladder,
        intervals=intervals,
        sla_ms=sla_ms,
        mann_whitney_p=p_value,
        distributions_differ=p_value < ALPHA,
        p99_change=change,
        p99_significant=not p99_interval.overlap,
        verdict="",
        sides=(a, b),
    )
    result.verdict = verdict(result)
    return result


def _summary(side: Side, sorted_us: np.ndarray, sla_ms: float | None) -> SideSummary:
    return SideSummary(
        label=side.label,
        path=str(side.path),
        requests=side.requests,
        used=side.used,
        excluded=side.excluded,
        mean_ms=float(sorted_us.mean()) / US_PER_MS,
        min_ms=float(sorted_us[0]) / US_PER_MS,
        max_ms=float(sorted_us[-1]) / US_PER_MS,
        sla_error_rate=(
            share_slower(sorted_us, sla_ms * US_PER_MS) if sla_ms is not None else None
        ),
    )


def verdict(result: ComparisonResult) -> str:
    """One line: which way p99 moved, by how much, and whether that is more than noise."""
    p99 = result.row("p99")
    change = result.p99_change
    numbers = f"({p99.a_ms:.3g} ms → {p99.b_ms:.3g} ms)"
    if change == 0:
        head = f"B matches A at p99 {numbers}"
    else:
        way = "slower" if change > 0 else "faster"
        head = f"B is {way} at p99 by {abs(change) * 100:.1f}% {numbers}"
    pct = f"{result.confidence * 100:.0f}%"
    mw = f"Mann–Whitney {_p(result.mann_whitney_p)}"
    if result.p99_significant:
        return f"{head}, significant: the {pct} intervals of p99 do not overlap; {mw}"
    tail = (
        f"though the distributions differ ({mw})"
        if result.distributions_differ
        else f"and the distributions do not differ ({mw})"
    )
    return f"{head}, not significant: the {pct} intervals of p99 overlap, {tail}"


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"
