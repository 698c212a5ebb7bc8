"""`pinchpoint compare BASE NEW --gate`: a regression gate for CI.

Each check is one number of NEW against BASE and a tolerance, as k6's thresholds or
Gatling's assertions are one metric against a bound: p95 and p99 latency ratios (NEW over
BASE, at most), the throughput ratio (successful requests per second, at least) and the
rise of the failed share (NEW minus BASE, at most). The gate fails when any check does;
the CLI then exits 1, and `junit.py` writes the checks as a JUnit XML report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pinchpoint.compare.result import ComparisonResult
from pinchpoint.compare.sides import Side
from pinchpoint.compare.tolerances import Tolerances


@dataclass(frozen=True)
class Check:
    name: str  # "p95 latency"
    base: float
    new: float
    value: float  # the ratio or the rise judged
    limit: float
    at_most: bool  # the value must be at most the limit (else at least)
    unit: str  # "ms", "req/s" or "share"
    what: str  # "ratio" or "rise"

    @property
    def passed(self) -> bool:
        return self.value <= self.limit if self.at_most else self.value >= self.limit

    def line(self) -> str:
        """`p99 latency: ratio 1.31 > 1.2 (BASE 12.1 ms, NEW 15.9 ms): FAIL`."""
        sign = ("≤" if self.passed else ">") if self.at_most else ("≥" if self.passed else "<")
        value = f"{self.value:+.2%}" if self.what == "rise" else f"{self.value:.3g}"
        limit = f"{self.limit:+.2%}" if self.what == "rise" else f"{self.limit:g}"
        base, new = _amount(self.base, self.unit), _amount(self.new, self.unit)
        verdict = "pass" if self.passed else "FAIL"
        return (
            f"{self.name}: {self.what} {value} {sign} {limit} (BASE {base}, NEW {new}): {verdict}"
        )


def checks(result: ComparisonResult, tolerances: Tolerances) -> list[Check]:
    """The gate's checks of `result` (NEW is its B, BASE its A)."""
    if result.sides is None:
        raise ValueError("the comparison holds no sides to gate")
    base, new = result.sides
    out = []
    for label, limit in (("p95", tolerances.p95_ratio), ("p99", tolerances.p99_ratio)):
        row = result.row(label)
        ratio = row.b_ms / row.a_ms if row.a_ms else (1.0 if row.b_ms == 0 else float("inf"))
        out.append(Check(f"{label} latency", row.a_ms, row.b_ms, ratio, limit, True, "ms", "ratio"))
    a, b = throughput(base), throughput(new)
    ratio = b / a if a else 1.0
    out.append(
        Check("throughput", a, b, ratio, tolerances.throughput_ratio, False, "req/s", "ratio")
    )
    a, b = error_rate(base), error_rate(new)
    out.append(Check("error rate", a, b, b - a, tolerances.error_rate_rise, True, "share", "rise"))
    return out


def throughput(side: Side) -> float:
    """Successful requests per second, over the span from the first one's start to the
    last one's; 0 with fewer than two."""
    if side.used < 2:
        return 0.0
    span_s = float(np.max(side.start_us) - np.min(side.start_us)) / 1e6
    return side.used / span_s if span_s > 0 else 0.0


def error_rate(side: Side) -> float:
    """The share of the side's requests that failed."""
    return side.excluded / side.requests if side.requests else 0.0


def _amount(value: float, unit: str) -> str:
    if unit == "share":
        return f"{value:.2%}"
    return f"{value:.4g} {unit}"
