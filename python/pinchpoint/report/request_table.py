"""Per named request (a plan's request, a flow's step, a locustfile's request name): its
throughput, errors by class, latency and each tier's time at each load step. Shared by
the terminal and the HTML report; shown when a run sends more than one kind of request."""

from __future__ import annotations

from typing import Any

from pinchpoint.report import fmt
from pinchpoint.report.table import Column, StepTable, tiers


def named_requests(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in verdict.get("endpoints") or [] if isinstance(e, dict) and e.get("steps")]


def request_table(verdict: dict[str, Any]) -> StepTable:
    """A row per named request and load step; empty unless there are two named requests."""
    named = named_requests(verdict)
    if len(named) < 2:
        return StepTable([], [], None)
    shown = [t for t in tiers(verdict) if any(_tier(s, t) for e in named for s in e["steps"])]
    columns = [
        Column("", "request"),
        Column("", "users"),
        Column("", "req/s"),
        Column("", "errors"),
        Column("client", "p50"),
        *(Column(t, "p50 / self") for t in shown),
    ]
    rows = []
    for e in named:
        for s in e["steps"]:
            row = [
                str(e.get("endpoint")),
                fmt.rate(s.get("level")) if s.get("users") in (None, 0) else fmt.count(s["users"]),
                fmt.rate(s.get("throughput_rps")),
                _errors(s),
                fmt.ms(s.get("p50_ms")),
            ]
            for t in shown:
                stats = _tier(s, t)
                own = fmt.ms(stats.get("self_p50_ms")) if "self_p50_ms" in stats else fmt.DASH
                row.append(f"{fmt.ms(stats.get('p50_ms'))} / {own}" if stats else fmt.DASH)
            rows.append(row)
    return StepTable(columns, rows, None)


def _tier(step: dict[str, Any], tier: str) -> dict[str, Any]:
    stats = (step.get("tiers") or {}).get(tier)
    return stats if isinstance(stats, dict) else {}


def _errors(step: dict[str, Any]) -> str:
    """`0`, or the count with its classes: `12 (check 10, 503 2)`."""
    n = step.get("errors")
    by_class = step.get("errors_by_class") or {}
    if not fmt.is_number(n) or not n:
        return fmt.count(n) if fmt.is_number(n) else fmt.DASH
    parts = ", ".join(f"{k} {v}" for k, v in sorted(by_class.items(), key=lambda kv: -kv[1]))
    return f"{fmt.count(n)} ({parts})" if parts else fmt.count(n)
