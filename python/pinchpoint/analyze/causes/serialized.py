"""One named request served one at a time inside the app (a lock it takes, a
single-threaded section): its throughput stops near 1 ÷ its own shortest time, about one
served at once, while the plan's other requests stay flat."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause
from pinchpoint.analyze.context import load_text, rate_of
from pinchpoint.analyze.findings import Finding
from pinchpoint.analyze.thresholds import ONE_AT_ONCE


def serialized(
    name: str, entry: dict, tier: str, group: str, onset: dict, evidence: list[str]
) -> Finding | None:
    """The finding when the request `name` (its entry of the requests' table) is served
    about one at a time and its throughput stopped; None otherwise."""
    at_once = entry.get("workers")
    if at_once is None or at_once >= ONE_AT_ONCE or entry.get("behaviour") != "synchronous":
        return None
    top = max(entry["steps"], key=lambda s: s["level"])
    summary = (
        f"{name}'s throughput stops near {top['throughput_rps']:.0f} req/s from "
        f"{load_text(onset)} with about {at_once:.1f} served at once, while its time inside "
        f"{tier} grows and the other requests stay flat: the app serves this request one at "
        "a time (a lock it takes, a single-threaded section, a row every such request "
        "updates). Shorten or remove what it holds; more workers or CPU will not help."
    )
    return Finding(
        group, "serialized", onset["users"], evidence,
        f"{name}: serialized inside {group} (about {at_once:.1f} at once)", summary,
        rate_of(onset),
    )  # fmt: skip


# Asked of the one named request whose time grows while the others stay flat
# (per_request.py), before any tier of all the requests.
SERIALIZED = Cause(
    resource="serialized",
    saturates="one request at a time inside the app",
    reads=("endpoints.workers", "endpoints.behaviour", "endpoints.steps.tiers"),
    needs_cpu=False,
    find=None,
)
