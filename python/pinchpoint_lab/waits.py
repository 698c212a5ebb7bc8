"""Waiting for a condition instead of sleeping a fixed time: a test's process may be paused
for seconds on a busy host, so it polls for what it needs, up to a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(check: Callable[[], object], seconds: float = 10.0, every: float = 0.02) -> bool:
    """Polls `check` every `every` seconds until it holds or `seconds` have passed; whether
    it held."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
