"""A load's totals worked out from the engine's per-step counts and HdrHistograms (the
`steps` of the summary `run_steps` returns), never from the requests themselves: the
memory they take is set by the steps and the plan's requests, not by how many were sent.

Counts are exact; latencies are the histograms' (1 µs to one hour, 3 significant
digits: a percentile, the min or the max is the highest value, or for the min the
lowest, of its bucket, within 0.1% of the value a sort of the requests gives).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pinchpoint import _engine


def latency(step_or_endpoint: dict[str, Any]) -> dict[str, Any] | None:
    """The percentiles, min, max and mean of one engine histogram's entry (a step's or
    an endpoint's), as `p50` .. `p99.99`, `min`, `max`, `mean`; None if it has none."""
    if "min_us" not in step_or_endpoint:
        return None
    return {
        **{k: int(v) for k, v in step_or_endpoint["percentiles_us"].items()},
        "min": int(step_or_endpoint["min_us"]),
        "max": int(step_or_endpoint["max_us"]),
        "mean": float(step_or_endpoint["mean_us"]),
    }


def merged_latency(entries: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The latency of the entries' histograms added together (by the engine, as it sums
    its own; numpy's import would cost each `pinchpoint load` more CPU than its whole
    summary); None if they hold none."""
    return latency(_engine.merged_latency([bytes(entry["hdr_v2"]) for entry in entries]))


def totals(steps: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Over every step: `requests`, `responses`, `bytes`, `statuses` of the answers (by
    code, in order), `errors` by class (by name, in order) and `latency_us` of the
    answered requests."""
    statuses: Counter[int] = Counter()
    errors: Counter[str] = Counter()
    for step in steps:
        statuses.update({int(code): n for code, n in step["statuses"].items()})
        errors.update(step["errors"])
    return {
        "requests": sum(int(s["requests"]) for s in steps),
        "responses": sum(int(s["responses"]) for s in steps),
        "bytes": sum(int(s["bytes"]) for s in steps),
        "statuses": {str(code): statuses[code] for code in sorted(statuses)},
        "errors": {name: errors[name] for name in sorted(errors)},
        "latency_us": merged_latency(steps),
    }


def endpoint_totals(steps: Sequence[dict[str, Any]], names: Sequence[str]) -> list[dict]:
    """Per request of the plan (`names`, in the records' `endpoint` order), over every
    step: its requests, those that `failed` (no answer, or a status of 400 or more) and
    the latency of its answers."""
    out = []
    for index, name in enumerate(names):
        mine = [s["endpoints"][index] for s in steps if len(s["endpoints"]) > index]
        out.append(
            {
                "endpoint": index,
                "request": name,
                "requests": sum(int(e["requests"]) for e in mine),
                "failed": sum(int(e["failed"]) for e in mine),
                "latency_us": merged_latency(e for e in mine if e["requests"]),
            }
        )
    return out


def kind_totals(steps: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per kind of record (plan/kinds.py, in the engine's order), over every step: its
    `requests`, those that `failed` (no answer, or a status of 400 or more), their share
    `error_rate` and the latency of its answers. A kind with no record is left out, as
    are steps the engine did not count by kind."""
    out = {}
    for kind in _engine.KINDS:
        mine = [s["kinds"][kind] for s in steps if kind in s.get("kinds", {})]
        requests = sum(int(k["requests"]) for k in mine)
        if not requests:
            continue
        failed = sum(int(k["failed"]) for k in mine)
        out[kind] = {
            "requests": requests,
            "failed": failed,
            "error_rate": failed / requests,
            "latency_us": merged_latency(mine),
        }
    return out
