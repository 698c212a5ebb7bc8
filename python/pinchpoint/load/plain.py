"""`pinchpoint load`: one step of closed-loop users against a URL, summarised."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from rich.console import Console
from rich.table import Table

from pinchpoint.load.engine import run_steps
from pinchpoint.plan import Plan, parse_plan


def plain_plan(
    url: str, connections: int, seconds: float, threads: int, timeout: float, tag: bool
) -> Plan:
    parts = urlsplit(url)
    target = f"{parts.scheme}://{parts.netloc}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parse_plan(
        "\n".join(
            [
                "[target]",
                f"url = {json.dumps(target)}",
                f"tag = {'true' if tag else 'false'}",
                "[load]",
                f"lower = {connections}",
                f"upper = {connections}",
                f"duration = {seconds!r}",
                "warmup = 0",
                f"timeout = {timeout!r}",
                f"threads = {threads}",
                "[[request]]",
                f"path = {json.dumps(path)}",
            ]
        ),
        "command line",
    )


def plain_load(
    url: str,
    connections: int,
    seconds: float,
    threads: int = 0,
    timeout: float = 10.0,
    tag: bool = False,
    out: Path | None = None,
) -> dict:
    plan = plain_plan(url, connections, seconds, threads, timeout, tag)
    with tempfile.TemporaryDirectory(prefix="pinchpoint-load-") as tmp:
        run_dir = out or Path(tmp)
        run_dir.mkdir(parents=True, exist_ok=True)
        result = run_steps(plan, "load", run_dir)
        step = result.summary["steps"][0]
        start, end = result.summary["windows"][0] if result.summary["windows"] else (0, 1)
        elapsed = max((end - start) / 1e6, 1e-9)
        summary = {
            "url": url,
            "connections": connections,
            "duration_s": round(elapsed, 3),
            "requests": step["requests"],
            "responses": step["responses"],
            "requests_per_s": step["requests"] / elapsed,
            "bytes": step["bytes"],
            "statuses": {str(k): v for k, v in step["statuses"].items()},
            "errors": step["errors"],
            "latency_us": {
                **step["percentiles_us"],
                "min": step.get("min_us"),
                "max": step.get("max_us"),
                "mean": step.get("mean_us"),
            },
            "interrupted": result.interrupted,
        }
        if out is not None:
            (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def render_summary(summary: dict, console: Console) -> None:
    console.print(
        f"{summary['requests']} requests in {summary['duration_s']:.2f} s, "
        f"{summary['requests_per_s']:,.0f} req/s over {summary['connections']} connections",
        highlight=False,
    )
    table = Table(title="latency (ms)")
    lat = summary["latency_us"]
    for key in ("min", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max"):
        table.add_column(key, justify="right")
    table.add_row(
        *(
            f"{(lat.get(k) or 0) / 1000:.3f}"
            for k in ("min", "p50", "p90", "p95", "p99", "p99.9", "p99.99", "max")
        )
    )
    console.print(table)
    statuses = ", ".join(f"{k}: {v}" for k, v in summary["statuses"].items()) or "none"
    errors = ", ".join(f"{k}: {v}" for k, v in summary["errors"].items()) or "none"
    console.print(f"statuses {statuses}; errors {errors}", highlight=False)
