"""Records the answers the node_exporter preset's tests replay
(tests/collect/samples/prometheus_node_exporter.json): a real Prometheus scraping a real
node_exporter every second, one core busy at low priority (nice) and one at normal priority
from the middle of the window, then every preset column asked with `query_range` over 4 s
at a 1 s step and a 4 s rate window, with one series per CPU, an error answer and the
targets. Run it again when a preset's query changes.

    .venv/bin/python scripts/record_prometheus_sample.py
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from pinchpoint.collect.sources.promql import fill, series_queries
from pinchpoint.plan.prometheus import Series
from pinchpoint_lab.neighbour import CpuHog
from pinchpoint_lab.prometheus import prometheus_with_node_exporter

SAMPLE = (
    Path(__file__).resolve().parent.parent
    / "tests" / "collect" / "samples" / "prometheus_node_exporter.json"
)  # fmt: skip
WINDOW_S, STEP_S, POINTS = 4.0, 1.0, 5
BAD_QUERY = "sum(rate(node_cpu_seconds_total[4s])"


def _version(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    return (out.stdout + out.stderr).split("version ", 1)[1].split("+")[0].split()[0]


def record(folder: Path) -> dict[str, Any]:
    with prometheus_with_node_exporter(folder) as servers:
        instance = servers.node_exporter
        selector = f'instance="{instance}"'
        queries = {
            column: fill(query, WINDOW_S, STEP_S)
            for column, query in series_queries(
                Series(preset="node_exporter", selector=selector)
            ).items()
        }
        queries["per_cpu_user"] = f'rate(node_cpu_seconds_total{{mode="user",{selector}}}[4000ms])'
        time.sleep(WINDOW_S + 2)  # scrapes enough for the first point's rate window
        start = int(time.time())
        with CpuHog(1.0, max_seconds=30, nice=19), CpuHog(1.0, max_seconds=30):
            time.sleep(POINTS / 2 + 0.5)
            end = start + POINTS - 1
            time.sleep(max(0.0, end + 2 - time.time()))  # the last point scraped
        with httpx.Client(base_url=servers.prometheus_url, timeout=10) as http:
            answers = {
                column: http.get(
                    "/api/v1/query_range",
                    params={"query": q, "start": start, "end": end, "step": STEP_S},
                ).json()
                for column, q in queries.items()
            }
            bad = http.get(
                "/api/v1/query_range",
                params={"query": BAD_QUERY, "start": start, "end": end, "step": STEP_S},
            )
            targets = http.get("/api/v1/targets", params={"state": "active"}).text
    # No machine's name in the recording: the targets' global URLs name this host.
    targets = targets.replace(f"//{socket.gethostname()}:", "//localhost:")
    return {
        "recorded": (
            f"Prometheus {_version(['prometheus', '--version'])} scraping node_exporter "
            f"{_version(['prometheus-node-exporter', '--version'])} every 1s; query_range "
            f"over {WINDOW_S:g}s, step {STEP_S:g}s, rate window {WINDOW_S:g}s"
        ),
        "start": start,
        "end": end,
        "step": int(STEP_S),
        "instance": instance,
        "queries": queries,
        "answers": answers,
        "error": {"http_status": bad.status_code, "query": BAD_QUERY, "answer": bad.json()},
        "targets": json.loads(targets),
    }


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="pinchpoint-prometheus-") as folder:
        sample = record(Path(folder))
    SAMPLE.write_text(json.dumps(sample, indent=1) + "\n")
    print(f"recorded {len(sample['answers'])} answers into {SAMPLE.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
