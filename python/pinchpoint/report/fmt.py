"""Number formatting shared by the terminal and HTML reports."""

from __future__ import annotations

import math
from datetime import UTC, datetime

DASH = "–"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def ms(value: object) -> str:
    """Milliseconds: one decimal, or two significant digits below 1 ms."""
    if not is_number(value):
        return DASH
    x = float(value)  # type: ignore[arg-type]
    if x == 0:
        return "0.0"
    if abs(x) < 1:
        decimals = 1 - math.floor(math.log10(abs(x)))
        rounded = round(x, decimals)
        if abs(rounded) < 1:
            return f"{rounded:.{decimals}f}"
    return f"{x:.1f}"


def rate(value: object) -> str:
    """Requests per second."""
    if not is_number(value):
        return DASH
    x = float(value)  # type: ignore[arg-type]
    return f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}"


def percent(fraction: object) -> str:
    """A fraction (0.012) as a percentage ("1.2%"), two significant digits below 1%."""
    if not is_number(fraction):
        return DASH
    p = float(fraction) * 100  # type: ignore[arg-type]
    if p == 0:
        return "0%"
    if abs(p) >= 10:
        return f"{p:.0f}%"
    if abs(p) >= 1:
        return f"{p:.1f}%"
    return f"{ms(p)}%"


def count(value: object) -> str:
    if not is_number(value):
        return DASH
    return f"{int(value):,}"  # type: ignore[call-overload]


def errors(n: object, fraction: object) -> str:
    """Error count with its share of requests: "12 (1.0%)", or "0"."""
    if not is_number(n):
        return DASH
    if int(n) == 0:  # type: ignore[call-overload]
        return "0"
    return f"{count(n)} ({percent(fraction)})"


def duration(seconds: object) -> str:
    if not is_number(seconds):
        return DASH
    s = float(seconds)  # type: ignore[arg-type]
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
    when = datetime.fromtimestamp(float(unix_s), tz=UTC)  # type: ignore[arg-type]
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def mib(n_bytes: object) -> str:
    if not is_number(n_bytes):
        return DASH
    return f"{float(n_bytes) / 2**20:.1f} MiB"  # type: ignore[arg-type]
