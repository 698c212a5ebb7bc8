"""The statistics of a comparison. Percentiles are nearest-rank: each is a latency that
was observed (as HdrHistogram and wrk2 report them)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

LADDER = (50.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)
INTERVAL_PERCENTILES = (50.0, 99.0, 99.9)
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
ALPHA = 0.05


def percentile(sorted_values: np.ndarray, q: float) -> float:
    """The nearest-rank q-th percentile (0 < q ≤ 100) of an ascending array."""
    n = sorted_values.size
    rank = max(1, math.ceil(q / 100 * n - 1e-9))
    return float(sorted_values[min(rank, n) - 1])


def bootstrap_interval(
    sorted_values: np.ndarray,
    q: float,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the nearest-rank q-th percentile.

    A resample's percentile is its m-th smallest value, which is the original's k-th
    smallest for k = min{k : N_k ≥ m}, where N_k, the count of draws among the k+1
    smallest, is Binomial(n, (k+1)/n). So the resampled percentile's index has an exact,
    known distribution, and drawing from it is the same bootstrap as resampling n values
    each time, at no cost per resample."""
    n = sorted_values.size
    m = max(1, math.ceil(q / 100 * n - 1e-9))
    # The index lies within a few binomial spreads of m; 12 of them leave out < 1e-30.
    spread = 12 * math.sqrt(n * (q / 100) * (1 - q / 100)) + 12
    low_k = max(0, int(m - 1 - spread))
    high_k = min(n - 1, int(m - 1 + spread))
    ks = np.arange(low_k, high_k + 1)
    cdf = stats.binom.sf(m - 1, n, (ks + 1) / n)  # P(index ≤ k)
    cdf[-1] = 1.0
    draws = ks[np.searchsorted(cdf, rng.random(resamples), side="left")]
    values = np.sort(sorted_values[draws])
    tail = (1 - confidence) / 2
    return percentile(values, tail * 100), percentile(values, (1 - tail) * 100)


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided Mann–Whitney U test: is one side's latency stochastically larger?"""
    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def share_slower(values: np.ndarray, limit: float) -> float:
    """Share of values strictly above limit."""
    return float(np.count_nonzero(values > limit)) / values.size
