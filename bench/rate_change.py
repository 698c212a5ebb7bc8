"""How exactly an open-loop phase begun by a change of rate keeps its schedule, beside a
phase planned at that rate.

nginx (one worker, a tiny static response, as `bench/engine_vs_wrk.py` starts it) is
pinned to one core; the engine sends from the other. Each round runs, one after the
other, the plan `--low` req/s for 3 s then `--high` req/s for 3 s twice: once as
planned, once changed to `--high` 1 s in (`LiveControl.ask_rate`, as `pinchpoint control
--rate` asks it). For the `--high` phase of each: the achieved rate (requests sent in its
window over its length) against the target, and the send lag p99 (actual − intended
send); for the change, how long after it was asked its phase began. Medians of the rounds,
and the changed phase's figures as ratios to the planned one's.

    .venv/bin/python bench/rate_change.py --low 1000 --high 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_vs_wrk import start_nginx

from pinchpoint.load.control import ControlError, LiveControl
from pinchpoint.load.engine import run_steps
from pinchpoint.plan.model import Plan, parse_plan

CHANGE_AFTER_S = 1.0


def plan_text(url: str, low: float, high: float) -> str:
    return f"""
[target]
url = "{url}"
tag = true

[load]
threads = 1
warmup = "0s"
timeout = "5s"

[[load.phase]]
duration = "3s"
arrival_rate = {low}

[[load.phase]]
duration = "3s"
arrival_rate = {high}

[[request]]
path = "/"
"""


def _change(control: LiveControl, rate: float, asked: list[float]) -> None:
    """Asks for `rate` CHANGE_AFTER_S after the load began (retried until it has)."""
    time.sleep(CHANGE_AFTER_S)
    for _ in range(200):
        at = time.time()
        try:
            control.ask_rate(rate, "terminal")
            asked.append(at)
            return
        except ControlError:
            time.sleep(0.01)


def one_run(plan: Plan, high: float, change: bool) -> dict[str, float]:
    """The `high` phase's achieved rate and send lag p99; with `change`, the delay from
    the change asked to its phase's start too."""
    control = LiveControl(plan) if change else None
    asked: list[float] = []
    asker = threading.Thread(target=_change, args=(control, high, asked)) if control else None
    with tempfile.TemporaryDirectory(prefix="pinchpoint-rate-bench-") as tmp:
        if asker is not None:
            asker.start()
        result = run_steps(plan, "bench-rate", Path(tmp), control=control)
        if asker is not None:
            asker.join()
        table = pq.read_table(result.requests_path, columns=["step", "start_us", "intended_us"])
    start_us, end_us = result.summary["windows"][1]
    step = table["step"].to_numpy()
    start = table["start_us"].to_numpy()[step == 1]
    lag = start - table["intended_us"].to_numpy()[step == 1]
    in_window = int(np.sum((start >= start_us) & (start < end_us)))
    got = {
        "achieved_rps": in_window / ((end_us - start_us) / 1e6),
        "lag_p99_us": float(np.percentile(lag, 99)),
    }
    if change:
        [made] = result.summary["changes"]
        got["delay_ms"] = (made["at"] - asked[0]) * 1e3
    return got


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--low", type=float, default=1000.0, help="the first phase, req/s")
    ap.add_argument("--high", type=float, default=5000.0, help="the second, and the change")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    before = os.sched_getaffinity(0)
    planned: list[dict[str, float]] = []
    changed: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="pinchpoint-bench-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=0)
        plan = parse_plan(plan_text(f"http://127.0.0.1:{port}", args.low, args.high), "bench")
        os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
        try:
            for r in range(args.rounds):
                # Interleaved, each round's order swapped: neither side always goes first.
                for is_change in (r % 2 == 0, r % 2 == 1):
                    got = one_run(plan, args.high, is_change)
                    (changed if is_change else planned).append(got)
                    print(f"round {r + 1} {'changed' if is_change else 'planned'}: {got}")
        finally:
            os.sched_setaffinity(0, before)
            nginx.terminate()
            nginx.wait(timeout=10)

    def median(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    rate_c, rate_p = median(changed, "achieved_rps"), median(planned, "achieved_rps")
    lag_c, lag_p = median(changed, "lag_p99_us"), median(planned, "lag_p99_us")
    print(
        f"\nmedian of {args.rounds} rounds, target {args.high:,.0f} req/s: changed phase "
        f"{rate_c:,.1f} req/s ({(rate_c / args.high - 1) * 100:+.3f}%), planned "
        f"{rate_p:,.1f} ({(rate_p / args.high - 1) * 100:+.3f}%), ratio {rate_c / rate_p:.4f}; "
        f"send lag p99 {lag_c:.0f} µs against {lag_p:.0f} µs, ratio {lag_c / lag_p:.2f}; "
        f"the change began {median(changed, 'delay_ms'):.1f} ms after it was asked "
        f"(rounds {min(r['delay_ms'] for r in changed):.1f}–"
        f"{max(r['delay_ms'] for r in changed):.1f} ms); "
        f"1-minute load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
