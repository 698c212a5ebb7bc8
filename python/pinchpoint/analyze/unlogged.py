"""Tiers that log nothing, timed by what their caller logged of them.

A proxy logs how long it waited on the server it passes a request to (nginx's
`$upstream_response_time`, HAProxy's `Tr`): the server's time, its accept queue included.
So a server the plan knows by its processes alone (no log, no spans) gets its caller's
upstream time as its own time, request by request, and is weighed like any other tier;
and a caller that logs an upstream time while the plan names nothing it calls gets an
unnamed tier below it (`<caller>-upstream`), so that the time is not counted as the
proxy's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

UPSTREAM = "-upstream"


@dataclass
class Timed:
    """The records with those added, the calls with the unnamed tiers, and which caller
    timed each tier that logged nothing."""

    tiers: pl.DataFrame
    calls: dict[str, list[str]]
    timed_by: dict[str, str] = field(default_factory=dict)


def by_callers(tiers: pl.DataFrame, calls: dict[str, list[str]]) -> Timed:
    """Each tier without records, called by one tier that calls only it and logged an
    upstream time, timed by that; an unnamed tier below each caller that logged an
    upstream time but calls none."""
    if tiers.is_empty() or "upstream_s" not in tiers.columns:
        return Timed(tiers, calls)
    logged = set(tiers["component"].unique().to_list())
    calls = {name: list(callees) for name, callees in calls.items()}
    timed_by: dict[str, str] = {}
    added = []
    for caller, callees in list(calls.items()):
        if caller not in logged or len(callees) > 1:
            continue
        if callees and (callees[0] in logged or _callers(callees[0], calls) != [caller]):
            continue
        waited = tiers.filter((pl.col("component") == caller) & pl.col("upstream_s").is_not_null())
        if waited.height == 0:
            continue
        callee = callees[0] if callees else f"{caller}{UPSTREAM}"
        if not callees:
            calls[caller] = [callee]
            calls[callee] = []
        timed_by[callee] = caller
        added.append(
            waited.with_columns(
                pl.lit(callee, dtype=tiers.schema["component"]).alias("component"),
                pl.col("upstream_s").alias("duration_s"),
                pl.lit(None, dtype=tiers.schema["upstream_s"]).alias("upstream_s"),
            )
        )
    if not added:
        return Timed(tiers, calls)
    return Timed(pl.concat([tiers, *added]), calls, timed_by)


def _callers(name: str, calls: dict[str, list[str]]) -> list[str]:
    return [caller for caller, callees in calls.items() if name in callees]
