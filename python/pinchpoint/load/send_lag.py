"""How late an open-loop run's requests left against their schedule (`start_us -
intended_us`), from the send-lag histogram and exact max the engine keeps per phase
(`send_lag_hdr_v2`, `send_lag_max_us` of its summary's steps): the memory it takes does
not grow with the requests, and no record is read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pinchpoint.load.hdr import COUNTS_LEN, Histogram, decode_v2


def _with_lag(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in steps if "send_lag_max_us" in s]


def _counts(steps: Sequence[dict[str, Any]]) -> np.ndarray:
    counts = np.zeros(COUNTS_LEN, dtype=np.int64)
    for step in steps:
        counts += decode_v2(bytes(step["send_lag_hdr_v2"]))
    return counts


def merged_send_lag(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The steps' send lags added together, as a step has them (`send_lag_hdr_v2`,
    `send_lag_max_us`); empty when none has any."""
    mine = _with_lag(steps)
    if not mine:
        return {}
    return {
        "send_lag_hdr_v2": Histogram.of_counts(_counts(mine)).v2(),
        "send_lag_max_us": max(int(s["send_lag_max_us"]) for s in mine),
    }


def send_lag_us(steps: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The send lag's `p50` and `p99` (the histogram's, 3 significant digits; a lag under
    1 µs counts as 1 µs) and its exact `max`, in µs, over the steps; None when no request
    was sent."""
    mine = _with_lag(steps)
    if not mine:
        return None
    histogram = Histogram.of_counts(_counts(mine))
    return {
        "p50": histogram.value_at_quantile(0.5),
        "p99": histogram.value_at_quantile(0.99),
        "max": max(int(s["send_lag_max_us"]) for s in mine),
    }
