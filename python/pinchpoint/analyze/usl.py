"""Gunther's Universal Scalability Law fitted to throughput by load:

    X(N) = λN / (1 + σ(N − 1) + κN(N − 1))

λ is the throughput of one user without contention, σ the share of work serialised
(contention) and κ the cost of keeping shared state coherent (crosstalk), which makes
throughput peak at N* = sqrt((1 − σ)/κ) and fall beyond it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

# σ or κ counts as zero when its term in the denominator stays below this at the highest
# load tested: it changes the throughput there by less than 0.1%, which no run can tell.
NEGLIGIBLE = 1e-3
# Starting points for σ and κ; the fit keeps the one with the least squared error.
STARTS = ((0.01, 1e-4), (0.1, 1e-3), (0.3, 0.01))


@dataclass(frozen=True)
class UslFit:
    lambda_: float
    sigma: float
    kappa: float
    peak_throughput: float | None
    peak_load: float | None
    r_squared: float
    rms_relative_error: float

    def as_dict(self) -> dict[str, float | None]:
        return {
            "lambda": self.lambda_,
            "sigma": self.sigma,
            "kappa": self.kappa,
            "peak_throughput": self.peak_throughput,
            "peak_load": self.peak_load,
            "r_squared": self.r_squared,
            "rms_relative_error": self.rms_relative_error,
        }


def usl(n: np.ndarray, lambda_: float, sigma: float, kappa: float) -> np.ndarray:
    """Throughput at load `n` by the Universal Scalability Law."""
    return np.asarray(lambda_ * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)))


def fit_usl(load: Sequence[float], throughput: Sequence[float]) -> UslFit | None:
    """The USL fitted to the steps, or None with fewer than 3 steps or a failed fit."""
    n, x = _clean(load, throughput)
    if len(np.unique(n)) < 3:
        return None
    params = _best_fit(n, x)
    if params is None:
        return None
    lambda_, sigma, kappa = params
    predicted = usl(n, *params)
    sst = float(((x - x.mean()) ** 2).sum())
    sse = float(((x - predicted) ** 2).sum())
    peak_load, peak = _peak(lambda_, sigma, kappa, float(n.max()))
    return UslFit(
        lambda_=lambda_,
        sigma=sigma,
        kappa=kappa,
        peak_throughput=peak,
        peak_load=peak_load,
        r_squared=1 - sse / sst if sst > 0 else 0.0,
        rms_relative_error=float(np.sqrt(np.mean(((predicted - x) / x) ** 2))),
    )


def _clean(load: Sequence[float], throughput: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n, x = (
        np.asarray([np.nan if v is None else v for v in col], dtype=float)
        for col in (load, throughput)
    )
    keep = np.isfinite(n) & np.isfinite(x) & (n > 0) & (x > 0)
    return n[keep], x[keep]


def _best_fit(n: np.ndarray, x: np.ndarray) -> tuple[float, float, float] | None:
    # Imported where a curve is fitted: reading a verdict needs no optimizer.
    from scipy.optimize import OptimizeWarning, curve_fit

    lambda0 = float(np.max(x / n))
    best, best_sse = None, math.inf
    for sigma0, kappa0 in STARTS:
        try:
            with warnings.catch_warnings():
                # Three steps leave no freedom to estimate a covariance; the fit stands.
                warnings.simplefilter("ignore", OptimizeWarning)
                params, _ = curve_fit(
                    usl,
                    n,
                    x,
                    p0=(lambda0, sigma0, kappa0),
                    bounds=([1e-12, 0.0, 0.0], [np.inf, np.inf, np.inf]),
                    maxfev=10_000,
                )
        except (RuntimeError, ValueError):
            continue
        sse = float(((usl(n, *params) - x) ** 2).sum())
        if np.all(np.isfinite(params)) and sse < best_sse:
            best, best_sse = cast(tuple[float, float, float], tuple(float(p) for p in params)), sse
    return best


def _peak(
    lambda_: float, sigma: float, kappa: float, max_load: float
) -> tuple[float | None, float | None]:
    """The load where throughput peaks and the throughput there; without coherency cost,
    no peak load and the ceiling λ/σ that contention alone sets (None without either)."""
    if sigma >= 1:
        return 1.0, lambda_  # contention alone stops throughput from growing past one user
    if kappa * max_load * (max_load - 1) < NEGLIGIBLE:
        bounded = sigma * (max_load - 1) >= NEGLIGIBLE
        return None, (lambda_ / sigma if bounded else None)
    peak_load = math.sqrt((1 - sigma) / kappa)
    return peak_load, float(usl(np.array(peak_load), lambda_, sigma, kappa))
