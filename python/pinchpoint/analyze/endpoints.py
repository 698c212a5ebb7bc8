"""Each request of the plan on its own: does its throughput reach a ceiling as the load grows?

A server that gives an endpoint a fixed number of workers (synchronous workers, each
holding a request until it is answered) stops gaining throughput once they are all busy,
and the latency then grows with the load: the requests it serves at once are about its
peak throughput × its minimal latency (Little's law, as one counts a server's workers by
hand). An asynchronous server keeps gaining throughput with flat latency as the load
grows: the requests in flight (throughput × mean latency) follow the load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

import polars as pl

from pinchpoint.analyze.client import min_latency
from pinchpoint.analyze.run_input import RunInput
from pinchpoint.analyze.steps import Window, tier_step
from pinchpoint.analyze.thresholds import (
    CEILING_SHARE,
    GROWTH_MIN_MS,
    GROWTH_SHARE,
    LOAD_RANGE,
    LOAD_STEP,
)
from pinchpoint.rundir.digest import FAILED, OK, Digest
from pinchpoint.rundir.shapes import EndpointJson, EndpointStepJson, TierJson


def endpoint_table(data: RunInput) -> list[EndpointJson]:
    """Per request of the plan: its steps (throughput, latency, concurrency), its worker
    estimate and its behaviour. Empty for runs whose records do not name the request."""
    digest = data.digest()
    if digest.count() == 0 or "endpoint" not in digest.source:
        return []
    windows = data.windows()
    graph = data.tier_graph()
    out: list[EndpointJson] = []
    for index, name in enumerate(data.endpoint_names()):
        mine = digest.where(pl.col("endpoint") == index)
        if mine.count() == 0:
            continue
        steps: list[EndpointStepJson] = []
        for i, w in enumerate(windows):
            ids = data.traced_ids(i, index) if data.tiers.height else None
            part = mine.where(pl.col("window") == i)
            step = _step(part, w, data.tiers, ids, graph, data.tier_share)
            if step is not None:
                steps.append(step)
        out.append(describe(name, index, steps, min_latency(mine), mine.by_class()))
    return out


def _step(
    part: Digest,
    w: Window,
    tiers: pl.DataFrame,
    req_ids: pl.Series | None,
    graph: tuple[list[str], dict[str, list[str]]],
    share: float = 1.0,
) -> EndpointStepJson | None:
    ok = part.where(OK)
    if ok.count() == 0:
        return None
    throughput = ok.count() / w.seconds
    p50_us = ok.percentiles_us([50])[0]
    mean_us = ok.mean_us()
    step: EndpointStepJson = {
        "users": w.users,
        "level": w.level if w.level is not None else w.users,
        "requests": part.count(),
        "errors": part.where(FAILED).count(),
        "errors_by_class": part.by_class(),
        "throughput_rps": throughput,
        "p50_ms": (p50_us or 0.0) / 1000,
        "concurrency": throughput * (mean_us or 0.0) / 1e6,
    }
    if tiers.height and req_ids is not None:
        step["tiers"] = _tiers(tier_step(tiers, req_ids, None, *graph, throughput, share))
    return step


def _tiers(step: dict[str, dict[str, Any]]) -> dict[str, TierJson]:
    """Each tier's time for this request alone: its median, and its own part of it."""
    return {tier: _own_part(times) for tier, times in step.items()}


# A tier's numbers kept for one request alone: its median and its own part of it.
OWN_PART = ("count", "p50_ms", "self_p50_ms", "queue_p50_ms")


def _own_part(times: dict[str, Any]) -> TierJson:
    return cast(TierJson, {key: times[key] for key in OWN_PART if key in times})


class _Peak(TypedDict, total=False):
    workers: float
    peak_throughput_rps: float
    at_users: int


class _Behaviour(TypedDict, total=False):
    ceiling: float | None


def describe(
    endpoint: str,
    index: int,
    steps: list[EndpointStepJson],
    min_ms: float | None,
    failures: Mapping[str, int] | None = None,
) -> EndpointJson:
    """The finding of one endpoint from its steps (ordered by load); `failures`: its failed
    requests by class (status or error), said when none was answered."""
    top = max(steps, key=lambda s: s["throughput_rps"], default=None)
    peak: _Peak = {}
    if top is not None and min_ms is not None:
        peak = {
            "workers": top["throughput_rps"] * min_ms / 1000,
            "peak_throughput_rps": top["throughput_rps"],
            "at_users": top["users"],
        }
    behaviour, ceiling = _behaviour(steps)
    entry: EndpointJson = {
        "endpoint": endpoint,
        "index": index,
        "steps": steps,
        "min_latency_ms": min_ms,
        **peak,
        "behaviour": behaviour,
        **ceiling,
        "summary": "",
    }
    entry["summary"] = _summary(entry, failures or {})
    return entry


def _behaviour(steps: list[EndpointStepJson]) -> tuple[str, _Behaviour]:
    """Synchronous (its throughput stops while its latency grows), asynchronous (flat
    latency over a wide range of load) or undecided, and its throughput's ceiling."""
    ordered = sorted(steps, key=lambda s: s["level"])
    if len(ordered) < 3:
        return "undecided", {}
    base, top = ordered[0], ordered[-1]
    # The ceiling is measured against the best step before the heaviest, not the one just
    # before it: one step a busy neighbour starved would read as a gain past it.
    best = max(ordered[:-1], key=lambda s: s["throughput_rps"])
    rise = top["p50_ms"] - base["p50_ms"]
    grew = rise > GROWTH_MIN_MS and rise > GROWTH_SHARE * base["p50_ms"]
    load_gain = top["level"] / max(best["level"], 1e-9) - 1
    gain = top["throughput_rps"] / max(best["throughput_rps"], 1e-9) - 1
    if grew and load_gain >= LOAD_STEP and gain < CEILING_SHARE * load_gain:
        return "synchronous", {"ceiling": top["throughput_rps"]}
    if not grew and top["level"] >= LOAD_RANGE * base["level"]:
        return "asynchronous", {"ceiling": None}
    return "undecided", {}


def _summary(e: EndpointJson, failures: Mapping[str, int]) -> str:
    top = max(e["steps"], key=lambda s: s["level"], default=None)
    if e["behaviour"] == "synchronous" and "workers" in e:
        return (
            f"{e['endpoint']}: throughput stops near {e['ceiling']:.0f} req/s while latency "
            f"grows with load; × its minimal latency {e['min_latency_ms']:.1f} ms, about "
            f"{e['workers']:.1f} requests are served at once (synchronous workers, or a "
            "saturated resource: see the bottleneck)"
        )
    if e["behaviour"] == "asynchronous" and top is not None:
        return (
            f"{e['endpoint']}: {top['concurrency']:.1f} requests in flight at the heaviest step "
            "with flat latency — no ceiling in the tested range (asynchronous, or more "
            "workers than the load)"
        )
    if "workers" in e:
        return (
            f"{e['endpoint']}: peak {e['peak_throughput_rps']:.0f} req/s × minimal latency "
            f"{e['min_latency_ms']:.1f} ms ≈ {e['workers']:.1f} requests served at once"
        )
    return _unanswered(e["endpoint"], failures)


def _unanswered(endpoint: str, failures: Mapping[str, int]) -> str:
    """What a request none of whose requests succeeded got instead, most frequent first."""
    total = sum(failures.values())
    ranked = sorted(failures.items(), key=lambda item: (-item[1], item[0]))
    if not ranked:
        return f"{endpoint}: no answered request"
    if len(ranked) == 1:
        return f"{endpoint}: every request {_outcome(ranked[0][0])} ({total} of {total})"
    said = ", ".join(f"{n} {_outcome(kind)}" for kind, n in ranked)
    return f"{endpoint}: no request succeeded: {said} (of {total})"


def _outcome(kind: str) -> str:
    # A failure's class is its HTTP status, or the engine's error where none came back.
    return f"answered {kind}" if kind.isdigit() else f"failed ({kind})"


def workers_estimates(endpoints: list[EndpointJson]) -> list[dict[str, Any]]:
    """The verdict's `workers_estimate` entries, one per endpoint that was answered."""
    return [
        {
            "endpoint": e["endpoint"],
            "peak_throughput_rps": e["peak_throughput_rps"],
            "at_users": e["at_users"],
            "min_latency_ms": e["min_latency_ms"],
            "workers": e["workers"],
        }
        for e in endpoints
        if "workers" in e
    ]
