"""The knee: the load where throughput stops scaling and latency bends.

Throughput is fitted with two straight segments joined at a breakpoint, the first one
through the origin: a closed loop with no users does no work, and that anchor pins the
breakpoint even when a single step precedes it. The breakpoint is the candidate (on a
fine grid between the steps) with the least squared error. Latency, fitted with two
segments joined at the same load, must bend upwards there. The confidence interval comes
from refitting the breakpoint on the fitted curve plus resampled residuals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# After the knee, throughput grows by less than this share of its slope before it.
MAX_SLOPE_RATIO = 0.5
# After the knee, latency's slope grows by at least this share of latency/load at the knee:
# the slope a closed loop shows once every extra user only queues.
MIN_LATENCY_BEND = 0.25
# The two-segment fit must beat a straight line through the origin at this level (F-test).
MAX_P_VALUE = 0.05
# A knee is reported only when it survives at least this share of the bootstrap refits.
MIN_CONFIDENCE = 0.5
GRID_PER_STEP = 50
BOOTSTRAP = 500
CI_LEVEL = 0.95
SEED = 20_261_122
METHOD = "two-segment fit (throughput through origin, latency cross-check), residual bootstrap"


@dataclass(frozen=True)
class Knee:
    load: float
    ci_low: float
    ci_high: float
    confidence: float
    throughput_at_knee: float
    method: str = METHOD


@dataclass(frozen=True)
class _Fit:
    knee: float
    slope_before: float
    slope_after: float
    sse: float


def _clean(
    load: Sequence[float], throughput: Sequence[float], latency: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The finite points, sorted by load."""
    cols = [
        np.asarray([np.nan if v is None else v for v in c], dtype=float)
        for c in (load, throughput, latency)
    ]
    x, y, lat = cols
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(lat) & (x > 0)
    order = np.argsort(x[keep], kind="stable")
    return x[keep][order], y[keep][order], lat[keep][order]


def _candidates(x: np.ndarray) -> np.ndarray:
    """Breakpoints from the first step up to (not including) the last but one, so the
    segment after a knee always holds two steps and its slope is measured, not implied."""
    return np.linspace(x[0], x[-2], GRID_PER_STEP * (len(x) - 2), endpoint=False)


def _hinge(x: np.ndarray, knee: float) -> np.ndarray:
    """Design matrix of two segments through the origin, joined at `knee`."""
    return np.column_stack([np.minimum(x, knee), np.maximum(x - knee, 0.0)])


def _projections(x: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate: the pseudo-inverse (coefficients from data) and the design."""
    designs = np.stack([_hinge(x, c) for c in grid])  # (C, n, 2)
    return np.linalg.pinv(designs), designs


def _fit_many(x: np.ndarray, ys: np.ndarray, grid: np.ndarray) -> list[_Fit]:
    """The best two-segment fit of each row of `ys` (shape (B, n))."""
    pinv, designs = _projections(x, grid)
    coef = np.einsum("cpn,bn->cbp", pinv, ys)  # (C, B, 2)
    fitted = np.einsum("cnp,cbp->cbn", designs, coef)
    sse = ((fitted - ys[None]) ** 2).sum(axis=2)  # (C, B)
    best = sse.argmin(axis=0)
    rows = np.arange(ys.shape[0])
    return [
        _Fit(float(grid[c]), float(coef[c, b, 0]), float(coef[c, b, 1]), float(sse[c, b]))
        for b, c in zip(rows, best, strict=True)
    ]


@dataclass(frozen=True)
class _Segments:
    fitted: np.ndarray
    slope_before: float
    slope_change: float
    at_knee: float
    p_value: float


def _latency_fit(x: np.ndarray, lat: np.ndarray, knee: float) -> _Segments:
    """Latency as two segments joined at `knee`, with the one-sided p-value of its slope
    growing there."""
    after = np.maximum(x - knee, 0.0)
    before_knee = np.count_nonzero(x < knee) >= 2
    # With one step before the knee its slope is unknown: take latency as flat there.
    cols = [np.ones_like(x), x, after] if before_knee else [np.ones_like(x), after]
    design = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(design, lat, rcond=None)
    fitted = design @ coef
    slope_before = float(coef[1]) if before_knee else 0.0
    change = float(coef[-1])
    return _Segments(
        fitted=fitted,
        slope_before=slope_before,
        slope_change=change,
        at_knee=float(coef[0] + slope_before * knee),
        p_value=_t_p_value(design, lat - fitted, change),
    )


def _t_p_value(design: np.ndarray, resid: np.ndarray, coef: float) -> float:
    """One-sided p-value of the last coefficient of a least-squares fit being > 0."""
    dof = design.shape[0] - design.shape[1]
    if dof <= 0:
        return 1.0
    var = float(resid @ resid) / dof * np.linalg.pinv(design.T @ design)[-1, -1]
    if var <= 0:
        return 0.0 if coef > 0 else 1.0
    return float(stats.t.sf(coef / np.sqrt(var), dof))


def _latency_bend(x: np.ndarray, lat: np.ndarray, knee: float) -> float:
    """How much latency's slope grows at `knee`, in units of latency/load at the knee."""
    seg = _latency_fit(x, lat, knee)
    if seg.at_knee <= 0:
        return 0.0
    return seg.slope_change / (seg.at_knee / knee)


def _p_value(x: np.ndarray, y: np.ndarray, fit: _Fit) -> float:
    """F-test of the two-segment fit (3 parameters) against a line through the origin."""
    dof = len(x) - 3
    if dof <= 0:
        return 1.0
    slope = float(x @ y / (x @ x))
    sse_line = float(((y - slope * x) ** 2).sum())
    if fit.sse <= 0:
        return 0.0
    f = ((sse_line - fit.sse) / 2) / (fit.sse / dof)
    return float(stats.f.sf(f, 2, dof))


def _is_knee(fit: _Fit, bend: float) -> bool:
    return (
        fit.slope_before > 0
        and fit.slope_after < MAX_SLOPE_RATIO * fit.slope_before
        and bend >= MIN_LATENCY_BEND
    )


def find_knee(
    load: Sequence[float], throughput: Sequence[float], latency: Sequence[float]
) -> Knee | None:
    """The load where throughput stops scaling and latency bends, or None when
    throughput keeps scaling over the tested range or there are fewer than 3 steps."""
    x, y, lat = _clean(load, throughput, latency)
    if len(np.unique(x)) < 3:
        return None
    grid = _candidates(x)
    fit = _fit_many(x, y[None], grid)[0]
    if not _is_knee(fit, _latency_bend(x, lat, fit.knee)):
        return None
    if _p_value(x, y, fit) > MAX_P_VALUE or _latency_fit(x, lat, fit.knee).p_value > MAX_P_VALUE:
        return None
    knees, confidence = _bootstrap(x, y, lat, fit, grid)
    if confidence < MIN_CONFIDENCE:
        return None
    tail = (1 - CI_LEVEL) / 2
    low, high = np.quantile(knees, [tail, 1 - tail])
    return Knee(
        load=fit.knee,
        ci_low=float(min(low, fit.knee)),
        ci_high=float(max(high, fit.knee)),
        confidence=confidence,
        throughput_at_knee=fit.slope_before * fit.knee,
    )


def _bootstrap(
    x: np.ndarray, y: np.ndarray, lat: np.ndarray, fit: _Fit, grid: np.ndarray
) -> tuple[np.ndarray, float]:
    """Breakpoints refitted on resampled residuals, and the share of refits that still
    show a knee within one step of the fitted one."""
    rng = np.random.default_rng(SEED)
    n = len(x)
    fitted = _hinge(x, fit.knee) @ np.array([fit.slope_before, fit.slope_after])
    # Residuals of a fit shrink by its parameters; rescale them to the noise they stand for.
    resid = (y - fitted) * np.sqrt(n / max(n - 3, 1))
    resid -= resid.mean()
    lat_fit = _latency_fit(x, lat, fit.knee).fitted
    lat_resid = (lat - lat_fit) * np.sqrt(n / max(n - 3, 1))
    lat_resid -= lat_resid.mean()
    picks = rng.integers(0, n, size=(BOOTSTRAP, n))
    fits = _fit_many(x, fitted[None] + resid[picks], grid)
    lat_picks = rng.integers(0, n, size=(BOOTSTRAP, n))
    lats = lat_fit[None] + lat_resid[lat_picks]
    spacing = float(np.median(np.diff(x)))
    held = [
        abs(f.knee - fit.knee) <= spacing and _is_knee(f, _latency_bend(x, row, f.knee))
        for f, row in zip(fits, lats, strict=True)
    ]
    return np.array([f.knee for f in fits]), float(np.mean(held))
