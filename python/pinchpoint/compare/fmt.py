"""Number formatting for the comparison, shared by the terminal and the page."""

from __future__ import annotations

import math

DASH = "–"


def ms(value: float | None) -> str:
    """Milliseconds with about three significant digits, never in exponent form."""
    if value is None or not math.isfinite(value):
        return DASH
    x = abs(value)
    if x >= 100:
        return f"{value:.0f}"
    if x >= 10:
        return f"{value:.1f}"
    if x >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def ratio(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return DASH
    return f"{value:.2f}×"


def share(value: float | None) -> str:
    """A fraction as a percentage, with two decimals (SLA error rates are small)."""
    if value is None:
        return DASH
    return f"{value * 100:.2f}%"


def p_value(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def interval(low: float, high: float) -> str:
    return f"{ms(low)} – {ms(high)}"
