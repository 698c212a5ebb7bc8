"""The per-step table of a verdict (users × tiers), shared by the terminal and HTML reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pinchpoint.report import fmt


@dataclass(frozen=True)
class Column:
    group: str  # "" for the step's own columns, else "client" or a tier name
    label: str


@dataclass(frozen=True)
class StepTable:
    """Formatted cells; every latency is in milliseconds."""

    columns: list[Column]
    rows: list[list[str]]
    highlight: int | None  # index of the row where the bottleneck starts


def steps(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in verdict.get("steps") or [] if isinstance(s, dict)]


def tiers(verdict: dict[str, Any]) -> list[str]:
    return [str(t) for t in verdict.get("tiers") or []]


def tier_stats(step: dict[str, Any], tier: str) -> dict[str, Any]:
    stats = (step.get("tiers") or {}).get(tier)
    return stats if isinstance(stats, dict) else {}


def queued_tiers(verdict: dict[str, Any]) -> list[str]:
    """Tiers that report a queue time in at least one step."""
    return [
        t
        for t in tiers(verdict)
        if any(fmt.is_number(tier_stats(s, t).get("queue_p50_ms")) for s in steps(verdict))
    ]


def bottleneck_users(verdict: dict[str, Any]) -> int | None:
    bottleneck = verdict.get("bottleneck")
    if not isinstance(bottleneck, dict):
        return None
    users = bottleneck.get("starts_at_users")
    return int(users) if fmt.is_number(users) else None


def step_table(verdict: dict[str, Any]) -> StepTable:
    queued = set(queued_tiers(verdict))
    # Open loop: each step is a target rate, and requests that waited for a connection count.
    open_loop = any(step.get("kind") == "rate" for step in steps(verdict))
    columns = [
        Column("", "target req/s" if open_loop else "users"),
        *([Column("", "late")] if open_loop else []),
        Column("", "req/s"),
        Column("", "errors"),
        Column("client", "p50"),
        Column("client", "p95"),
        Column("client", "p99"),
    ]
    for tier in tiers(verdict):
        columns.append(Column(tier, "p50 / p95"))
        if tier in queued:
            columns.append(Column(tier, "queue p50"))

    rows: list[list[str]] = []
    highlight = None
    start_users = bottleneck_users(verdict)
    # Steps whose users were set while the run went: by whom (the live page, the terminal).
    set_by = {c.get("step"): c.get("by") for c in verdict.get("load_changes") or []}
    for i, step in enumerate(steps(verdict)):
        latency = step.get("latency_ms") or {}
        by = set_by.get(step.get("step"))
        row = [
            fmt.rate(step.get("level")) + (f" ({by})" if by else "")
            if open_loop
            else fmt.count(step.get("users")) + (f" ({by})" if by else ""),
            *([fmt.count(step.get("late"))] if open_loop else []),
            fmt.rate(step.get("throughput_rps")),
            fmt.errors(step.get("errors"), step.get("error_rate")),
            fmt.ms(latency.get("p50")),
            fmt.ms(latency.get("p95")),
            fmt.ms(latency.get("p99")),
        ]
        for tier in tiers(verdict):
            stats = tier_stats(step, tier)
            if stats:
                row.append(f"{fmt.ms(stats.get('p50_ms'))} / {fmt.ms(stats.get('p95_ms'))}")
            else:
                row.append(fmt.DASH)
            if tier in queued:
                row.append(fmt.ms(stats.get("queue_p50_ms")))
        rows.append(row)
        start_rate = (verdict.get("bottleneck") or {}).get("starts_at_rate")
        if open_loop:
            if highlight is None and start_rate is not None and step.get("level") == start_rate:
                highlight = i
        elif highlight is None and start_users is not None and step.get("users") == start_users:
            highlight = i
    return StepTable(columns, rows, highlight)
