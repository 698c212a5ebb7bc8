"""The verdict's advice as the demo stack can apply it (`pinchpoint demo --apply`)."""

from __future__ import annotations

from typing import Any


def advised_workers(verdict: dict[str, Any]) -> int | None:
    """The gunicorn worker count the verdict's prediction is for, when it names one."""
    found = verdict.get("bottleneck") or {}
    predicted = found.get("prediction") or {}
    if predicted.get("component") == "gunicorn" and predicted.get("setting") == "workers":
        return int(predicted["to"])
    return None
