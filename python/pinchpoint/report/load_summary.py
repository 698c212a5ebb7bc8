"""The summary of `pinchpoint load` (summary.json) for people, in the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

# rich only to draw: `pinchpoint load --json` prints its summary without it.
if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def render_summary(summary: dict, console: Console) -> None:
    """The summary for people: totals, latency percentiles, steps and endpoints."""
    from rich.table import Table
    from rich.text import Text

    over = (
        f"over {summary['connections']} connections"
        if summary.get("connections")
        else f"{summary['model']} loop, {len(summary['steps'])} step(s)"
    )
    console.print(
        f"{summary['requests']} requests in {summary['duration_s']:.2f} s, "
        f"{summary['requests_per_s']:,.0f} req/s {over}",
        highlight=False,
    )
    if summary["latency_us"] is None:
        console.print("latency: no responses", highlight=False)
    else:
        table = Table(title="latency (ms), answered requests")
        keys = ("min", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max")
        for key in keys:
            table.add_column(key, justify="right")
        table.add_row(*(_ms(summary["latency_us"].get(k)) for k in keys))
        console.print(table)
    if len(summary["steps"]) > 1:
        console.print(_steps_table(summary["steps"]))
    if len(summary["endpoints"]) > 1:
        console.print(_endpoints_table(summary["endpoints"]))
    kinds = summary.get("kinds") or {}
    if set(kinds) - {"request"}:
        console.print(_kinds_table(kinds))
    statuses = ", ".join(f"{k}: {v}" for k, v in summary["statuses"].items()) or "none"
    errors = errors_text(summary["errors"], summary.get("error_reasons") or {})
    console.print(f"statuses {statuses}; errors {errors}", highlight=False)
    gen = summary["generator"]
    lag = gen.get("send_lag_us")
    lag_text = f"; send lag p99 {lag['p99'] / 1000:.3f} ms" if lag else ""
    console.print(
        f"generator: {gen['cpu_cores']:.2f} of {gen['threads']} cores{lag_text}", highlight=False
    )
    if summary.get("interrupted"):
        console.print(Text(interrupted_line(summary), style="bold yellow"))
    if summary.get("aborted"):
        console.print(Text(f"Aborted: {summary['aborted']}.", style="bold yellow"))
    if gen["saturated"]:
        console.print(
            Text(
                "The load generator was saturated: these results measure the generator, "
                "not the target. Give it more cores (--threads) or fewer connections.",
                style="bold red",
            )
        )


def interrupted_line(summary: dict) -> str:
    """What the terminal says of a load cut short."""
    by = f" by {summary['signal']}" if summary.get("signal") else ""
    abandoned = summary.get("abandoned") or 0
    dropped = f"; {abandoned} requests in flight abandoned" if abandoned else ""
    return (
        f"Interrupted{by}: the summary covers the {summary['requests']} requests that "
        f"ended before the stop{dropped}."
    )


def errors_text(errors: dict[str, int], reasons: dict[str, list[str]]) -> str:
    """`tls: 50 (invalid peer certificate: UnknownIssuer)`, per class; `none` if none."""
    parts = []
    for name, count in errors.items():
        why = "; ".join(reasons.get(name) or [])
        parts.append(f"{name}: {count}" + (f" ({why})" if why else ""))
    return ", ".join(parts) or "none"


# What each kind of record is called in the summary.
KIND_NAMES = {
    "request": "HTTP requests",
    "ws_session": "WebSocket sessions",
    "ws_message": "WebSocket messages",
    "grpc_call": "gRPC calls",
    "grpc_message": "gRPC stream messages",
}


def _kinds_table(kinds: dict[str, dict]) -> Table:
    """Each kind of record apart: a failed call is not diluted by the messages."""
    from rich.table import Table

    table = Table(title="by kind (latency in ms)")
    table.add_column("kind")
    for name in ("count", "failed", "error rate", "p50", "p99"):
        table.add_column(name, justify="right")
    for kind, k in kinds.items():
        latency = k.get("latency_us") or {}
        table.add_row(
            KIND_NAMES.get(kind, kind),
            f"{k['requests']:,}",
            f"{k['failed']:,}",
            f"{k['error_rate'] * 100:.2f}%",
            _ms(latency.get("p50")),
            _ms(latency.get("p99")),
        )
    return table


def _steps_table(steps: list[dict]) -> Table:
    from rich.table import Table

    table = Table(title="steps (latency in ms)")
    for name in ("step", "load", "req/s", "failed", "p50", "p99", "late"):
        table.add_column(name, justify="right")
    for s in steps:
        load = f"{s['level']:g}/s" if s.get("kind") == "rate" else f"{s['level']:g} users"
        failed = sum(s["errors"].values()) + sum(
            v for k, v in s["statuses"].items() if int(k) >= 400
        )
        table.add_row(
            str(s["step"]),
            f"{s['name']} ({load})" if s.get("name") else load,
            f"{s['requests_per_s']:,.1f}",
            str(failed),
            _ms((s["latency_us"] or {}).get("p50")),
            _ms((s["latency_us"] or {}).get("p99")),
            str(s.get("late", "")),
        )
    return table


def _endpoints_table(endpoints: list[dict]) -> Table:
    from rich.table import Table

    table = Table(title="requests (latency in ms)")
    for name in ("request", "count", "failed", "p50", "p95", "p99", "max"):
        table.add_column(name, justify="right" if name != "request" else "left")
    for e in endpoints:
        lat = e["latency_us"] or {}
        table.add_row(
            e["request"],
            str(e["requests"]),
            str(e["failed"]),
            *(_ms(lat.get(k)) for k in ("p50", "p95", "p99", "max")),
        )
    return table


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3f}"
