"""The knee: the load where throughput stops scaling and latency bends.

Throughput is fitted with two straight segments joined at a breakpoint, the first one
through the origin: a closed loop with no users does no work, and that anchor pins the
breakpoint even when a single step precedes it. The breakpoint is the candidate, on a fine
grid between the steps, with the least squared error. A knee must also hold against noise:
the fit must beat a straight line through the origin by more than noise alone would, and
latency, fitted with two segments joined at the same load, must bend upwards there. The
confidence interval comes from refitting on the fitted curves times resampled relative
residuals (throughput and latency noise grow with their level).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pinchpoint.analyze.thresholds import KNEE_LATENCY_BEND

# After the knee, throughput grows by less than this share of its slope before it.
MAX_SLOPE_RATIO = 0.5
# Both the throughput breakpoint and the latency bend must be significant at this level.
MAX_P_VALUE = 0.05
# Below this confidence the knee is not reported.
MIN_CONFIDENCE = 0.5
GRID_PER_STEP = 50
BOOTSTRAP = 500
CI_LEVEL = 0.95
SEED = 20_261_122
METHOD = "two-segment fit of throughput through the origin, latency cross-check, bootstrap CI"


@dataclass(frozen=True)
class Knee:
    load: float
    ci_low: float
    ci_high: float
    confidence: float
    throughput_at_knee: float
    method: str = METHOD

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


@dataclass(frozen=True)
class _Fit:
    knee: float
    slope_before: float
    slope_after: float
    sse: float


@dataclass(frozen=True)
class _Segments:
    fitted: np.ndarray
    slope_change: float
    at_knee: float
    p_value: float
    params: int


def find_knee(
    load: Sequence[float], throughput: Sequence[float], latency: Sequence[float]
) -> Knee | None:
    """The load where throughput stops scaling and latency bends, or None when throughput
    keeps scaling over the tested range or there are fewer than 3 steps."""
    x, y, lat = _clean(load, throughput, latency)
    if len(x) < 3:
        return None
    grid = _candidates(x)
    fit = _fit_many(x, y[None], grid)[0]
    bend = _latency_fit(x, lat, fit.knee)
    if not _is_knee(fit, bend):
        return None
    rng = np.random.default_rng(SEED)
    p_values = [
        p for p in (_breakpoint_p_value(x, y, fit, grid, rng), bend.p_value) if p is not None
    ]
    if max(p_values) > MAX_P_VALUE:
        return None
    knees, held = _bootstrap(x, y, lat, fit, grid, rng)
    confidence = held * (1 - max(p_values))
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


def _clean(
    load: Sequence[float], throughput: Sequence[float], latency: Sequence[float]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The finite points with a positive load, sorted by load; of repeated loads the first."""
    x, y, lat = (
        np.asarray([np.nan if v is None else v for v in col], dtype=float)
        for col in (load, throughput, latency)
    )
    keep = np.isfinite(x) & np.isfinite(y) & np.isfinite(lat) & (x > 0)
    x, y, lat = x[keep], y[keep], lat[keep]
    _, first = np.unique(x, return_index=True)
    return x[first], y[first], lat[first]


def _candidates(x: np.ndarray) -> np.ndarray:
    """Breakpoints from the first step up to (not including) the last but one, so the
    segment after a knee always holds two steps and its slope is measured, not implied."""
    return np.linspace(x[0], x[-2], GRID_PER_STEP * (len(x) - 2), endpoint=False)


def _hinge(x: np.ndarray, knee: float) -> np.ndarray:
    """Design matrix of two segments through the origin, joined at `knee`."""
    return np.column_stack([np.minimum(x, knee), np.maximum(x - knee, 0.0)])


def _fit_many(x: np.ndarray, ys: np.ndarray, grid: np.ndarray) -> list[_Fit]:
    """The best two-segment fit of each row of `ys` (shape (B, n))."""
    designs = np.stack([_hinge(x, c) for c in grid])  # (C, n, 2)
    coef = np.einsum("cpn,bn->cbp", np.linalg.pinv(designs), ys)  # (C, B, 2)
    fitted = np.einsum("cnp,cbp->cbn", designs, coef)
    sse = ((fitted - ys[None]) ** 2).sum(axis=2)  # (C, B)
    best = sse.argmin(axis=0)
    return [
        _Fit(float(grid[c]), float(coef[c, b, 0]), float(coef[c, b, 1]), float(sse[c, b]))
        for b, c in enumerate(best)
    ]


def _latency_fit(x: np.ndarray, lat: np.ndarray, knee: float) -> _Segments:
    """Latency as two segments joined at `knee`, with the one-sided p-value of its slope
    growing there."""
    after = np.maximum(x - knee, 0.0)
    with_slope = np.count_nonzero(x < knee) >= 2
    # With one step before the knee its slope is unknown: take latency as flat there.
    cols = [np.ones_like(x), x, after] if with_slope else [np.ones_like(x), after]
    design = np.column_stack(cols)
    coef, *_ = np.linalg.lstsq(design, lat, rcond=None)
    fitted = design @ coef
    slope_before = float(coef[1]) if with_slope else 0.0
    return _Segments(
        fitted=fitted,
        slope_change=float(coef[-1]),
        at_knee=float(coef[0] + slope_before * knee),
        p_value=_t_p_value(design, lat - fitted, float(coef[-1])),
        params=design.shape[1],
    )


def _t_p_value(design: np.ndarray, resid: np.ndarray, coef: float) -> float:
    """One-sided p-value of the last coefficient of a least-squares fit being above 0."""
    dof = design.shape[0] - design.shape[1]
    if dof <= 0:
        return 1.0
    var = float(resid @ resid) / dof * np.linalg.pinv(design.T @ design)[-1, -1]
    if var <= 0:
        return 0.0 if coef > 0 else 1.0
    # Student's t survival function as its CDF at -t: scipy.special loads in a third of
    # scipy.stats' second.
    from scipy.special import stdtr

    return float(stdtr(dof, -coef / np.sqrt(var)))


def _is_knee(fit: _Fit, latency: _Segments) -> bool:
    if fit.slope_before <= 0 or fit.slope_after >= MAX_SLOPE_RATIO * fit.slope_before:
        return False
    if latency.at_knee <= 0:
        return False
    return latency.slope_change >= KNEE_LATENCY_BEND * latency.at_knee / fit.knee


def _line_sse(x: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Squared error of the best line through the origin, for each row of `ys`."""
    slopes = ys @ x / (x @ x)
    return np.asarray(((ys - slopes[:, None] * x) ** 2).sum(axis=1))


def _f_stat(line_sse: np.ndarray, knee_sse: np.ndarray, dof: int) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(((line_sse - knee_sse) / 2) / (knee_sse / dof))


def _breakpoint_p_value(
    x: np.ndarray, y: np.ndarray, fit: _Fit, grid: np.ndarray, rng: np.random.Generator
) -> float | None:
    """How often a line through the origin, plus its own noise, gains as much from a
    breakpoint as the data does; None when no noise is left to judge by. An F table would
    be too lenient: the breakpoint is the best of many candidates."""
    n = len(x)
    if n <= 3:
        return None
    observed = _f_stat(_line_sse(x, y[None]), np.array([fit.sse]), n - 3)[0]
    line = x * float(x @ y / (x @ x))
    nulls = _resample(line, y - line, 1, rng)
    knee_sse = np.array([f.sse for f in _fit_many(x, nulls, grid)])
    simulated = _f_stat(_line_sse(x, nulls), knee_sse, n - 3)
    return float((1 + np.count_nonzero(simulated >= observed)) / (BOOTSTRAP + 1))


def _resample(
    fitted: np.ndarray, resid: np.ndarray, params: int, rng: np.random.Generator
) -> np.ndarray:
    """BOOTSTRAP copies of `fitted` times resampled relative residuals, centred and scaled
    up for what the fit's parameters absorbed."""
    n = len(fitted)
    rel = resid / np.maximum(np.abs(fitted), 1e-12) * np.sqrt(n / max(n - params, 1))
    rel -= rel.mean()
    return np.asarray(fitted[None] * (1 + rel[rng.integers(0, n, size=(BOOTSTRAP, n))]))


def _bootstrap(
    x: np.ndarray,
    y: np.ndarray,
    lat: np.ndarray,
    fit: _Fit,
    grid: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float]:
    """Breakpoints refitted on resampled data, and the share of refits that still show a
    knee within one step of the fitted one."""
    fitted = _hinge(x, fit.knee) @ np.array([fit.slope_before, fit.slope_after])
    fits = _fit_many(x, _resample(fitted, y - fitted, 3, rng), grid)
    seg = _latency_fit(x, lat, fit.knee)
    lats = _resample(seg.fitted, lat - seg.fitted, seg.params, rng)
    spacing = float(np.median(np.diff(x)))
    held = [
        abs(f.knee - fit.knee) <= spacing and _is_knee(f, _latency_fit(x, row, f.knee))
        for f, row in zip(fits, lats, strict=True)
    ]
    return np.array([f.knee for f in fits]), float(np.mean(held))
