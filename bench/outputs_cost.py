"""What `--metrics` and `--serve` cost the generator, side by side in one run.

nginx (one worker, a tiny static response) is pinned to core 0; the engine (one thread,
50 connections) is pinned to core 1 and loads it in four ways, interleaved over several
rounds: with the terminal's live view only (what every run has), with `--metrics` served
and scraped every second, with `--serve` followed by a page's event stream, and with
both. The scraper and the page's reader are other processes, so their CPU is not the
generator's. Printed per round and as medians: requests/s and requests per generator
CPU-second, each way's ratio to the first, and the share of the generator's CPU that the
outputs themselves took, measured where it is spent: the thread CPU time of each tick
they are fed and of each request they answer (the page's event stream included). On a
shared machine the rounds' rates vary by several percent; the measured share does not.

    .venv/bin/python bench/outputs_cost.py --seconds 10 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from engine_vs_wrk import start_nginx
from rich.console import Console

from pinchpoint.load.plain import UrlLoad, plain_load
from pinchpoint.outputs import MetricsServer, fan_out
from pinchpoint.outputs.live_page import LivePage
from pinchpoint.terminal.live import LiveView

# A second process that reads an address every second (the metrics) or its event stream.
SCRAPER = """
import sys, time, httpx
url, until = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    try: httpx.get(url, timeout=1)
    except httpx.HTTPError: pass
    time.sleep(1)
"""
READER = """
import sys, time, httpx
url, until = sys.argv[1], time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    try:
        with httpx.stream("GET", url, timeout=2) as r:
            for _ in r.iter_lines():
                if time.monotonic() > until: break
    except httpx.HTTPError: time.sleep(0.2)
"""
WAYS = ("live view", "--metrics", "--serve", "both")


def _reader(code: str, url: str, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code, url, str(seconds + 3)])


class Spent:
    """Thread CPU seconds spent in the calls it wraps, from any thread."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.lock = threading.Lock()

    def wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                with self.lock:
                    self.seconds += time.thread_time() - start

        return timed

    def handler(self, server: LivePage | MetricsServer) -> None:
        handler = server.httpd.RequestHandlerClass
        handler.do_GET = self.wrap(handler.do_GET)  # type: ignore[attr-defined]


def one(way: str, url: str, seconds: float, core: int) -> dict[str, float]:
    spent = Spent()
    with ExitStack() as stack:
        devnull = stack.enter_context(open(os.devnull, "w"))
        view = stack.enter_context(LiveView(Console(file=devnull), quiet=True))
        ticks: list[Callable[[dict], None] | None] = [view]
        readers = []
        if way in ("--metrics", "both"):
            metrics = stack.enter_context(MetricsServer("127.0.0.1", 0, "bench"))
            spent.handler(metrics)
            ticks.append(spent.wrap(metrics))
            readers.append(_reader(SCRAPER, f"http://127.0.0.1:{metrics.port}/metrics", seconds))
        if way in ("--serve", "both"):
            page = stack.enter_context(LivePage("127.0.0.1", 0, "bench"))
            spent.handler(page)
            ticks.append(spent.wrap(page))
            readers.append(_reader(READER, f"http://127.0.0.1:{page.port}/events", seconds))
        time.sleep(1.0)  # the readers connected
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {core})
        try:
            cpu0 = time.process_time()
            summary = plain_load(UrlLoad(url, 50, seconds, threads=1), on_tick=fan_out(*ticks))
            cpu = time.process_time() - cpu0
        finally:
            os.sched_setaffinity(0, before)
        for reader in readers:
            reader.wait(30)
    time.sleep(0.2)  # the event stream's handler returns once the page has closed
    requests = float(summary["requests"])
    return {
        "rps": requests / summary["duration_s"],
        "per_cpu_s": requests / cpu,
        "share": spent.seconds / cpu,
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    results: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-bench-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=0)
        url = f"http://127.0.0.1:{port}/"
        try:
            for r in range(args.rounds):
                for way in WAYS:
                    got = one(way, url, args.seconds, core=1)
                    results[way].append(got)
                    print(
                        f"round {r + 1} {way:>10}: {got['rps']:>9,.0f} req/s  "
                        f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                        f"outputs {got['share']:.3%} of its CPU",
                        flush=True,
                    )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    med = {
        w: {k: statistics.median(x[k] for x in rs) for k in ("rps", "per_cpu_s", "share")}
        for w, rs in results.items()
    }
    base = med[WAYS[0]]
    print()
    for w, m in med.items():
        print(
            f"median {w:>10}: {m['rps']:>9,.0f} req/s  {m['per_cpu_s']:>9,.0f} req per CPU-s  "
            f"ratio to the live view alone {m['per_cpu_s'] / base['per_cpu_s']:.3f}  "
            f"outputs {m['share']:.3%} of the generator's CPU"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
