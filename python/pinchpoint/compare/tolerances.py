"""How much worse a run may be than the one it is compared with before `compare --gate`
fails it: a module of its own, light, so that the command line reads its defaults without
loading the comparison (polars, scipy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerances:
    """How much worse NEW may be than BASE."""

    p95_ratio: float = 1.10
    p99_ratio: float = 1.20
    throughput_ratio: float = 0.90
    error_rate_rise: float = 0.01
