"""Number formatting shared by the terminal and HTML reports."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TypeGuard

DASH = "–"


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _small(x: float) -> str | None:
    """|x| < 1 with two significant digits, or None if that rounds to 1 or more."""
    decimals = 1 - math.floor(math.log10(abs(x)))
    rounded = round(x, decimals)
    return f"{rounded:.{decimals}f}" if abs(rounded) < 1 else None


def ms(value: object) -> str:
    """Milliseconds: one decimal, or two significant digits below 1 ms."""
    if not is_number(value):
        return DASH
    x = float(value)
    if x == 0:
        return "0.0"
    return (_small(x) if abs(x) < 1 else None) or f"{x:.1f}"


def rate(value: object) -> str:
    """Requests per second."""
    if not is_number(value):
        return DASH
    x = float(value)
    return f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}"


def percent(fraction: object) -> str:
    """A fraction (0.012) as a percentage ("1.2%"), two significant digits below 1%."""
    if not is_number(fraction):
        return DASH
    p = float(fraction) * 100
    if p == 0:
        return "0%"
    if abs(p) >= 10:
        return f"{p:.0f}%"
    small = _small(p) if abs(p) < 1 else None
    return f"{small or f'{p:.1f}'}%"


def count(value: object) -> str:
    if not is_number(value):
        return DASH
    return f"{int(value):,}"


def errors(n: object, fraction: object) -> str:
    """Error count with its share of requests: "12 (1.0%)", or "0"."""
    if not is_number(n):
        return DASH
    if int(n) == 0:
        return "0"
    return f"{count(n)} ({percent(fraction)})"


def duration(seconds: object) -> str:
    if not is_number(seconds):
        return DASH
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    minutes, secs = divmod(round(s), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def timestamp(unix_s: object) -> str:
    if not is_number(unix_s):
        return DASH
    when = datetime.fromtimestamp(float(unix_s), tz=UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")
