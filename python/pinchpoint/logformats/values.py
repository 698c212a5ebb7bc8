"""What a logged value reads as: a duration, a number, a time, a text."""

import math
from collections.abc import Callable
from typing import TypeVar

from pinchpoint.logformats.base import MAX_DURATION_S


def duration(seconds: float | None) -> float | None:
    """`seconds` if it is a time a request can take (finite, 0 to MAX_DURATION_S), else None."""
    if seconds is None or not 0.0 <= seconds <= MAX_DURATION_S:  # NaN fails the comparison
        return None
    return seconds


def finite(value: float | None) -> float | None:
    """`value` if it is a finite number, else None."""
    return value if value is not None and math.isfinite(value) else None


def to_float(text: str | None) -> float | None:
    """The number `text` holds, or None."""
    return _converted(text, float)


def to_int(text: str | None) -> int | None:
    """The integer `text` holds, or None."""
    return _converted(text, int)


_T = TypeVar("_T")


def _converted(text: str | None, convert: Callable[[str], _T]) -> _T | None:
    if text is None:
        return None
    try:
        return convert(text)
    except ValueError:
        return None


def logged(value: str | None) -> str | None:
    """A logged text value, None when it is absent or `-` (what servers log for none)."""
    return value if value not in (None, "-") else None


def ended(start: float | None, seconds: float | None) -> float | None:
    """When a request that started at `start` and took `seconds` (if known) ended."""
    if start is None:
        return None
    return start + (seconds or 0.0)
