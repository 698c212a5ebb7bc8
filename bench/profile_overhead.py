"""Throughput lost while `run --profile` samples: py-spy on a CPU-bound Flask app under
gunicorn (pinchpoint_lab/hot_code.py), the profiled step against the same stretch of the
steps beside it at the same load, in one run.

py-spy's own CPU over its window, as a share of the host's cores, is printed beside it:
the throughput of two steps at the same load moves by up to 15% on a shared machine, py-spy's
CPU does not.

Each repeat is one run of three stages holding the same users; py-spy samples the middle
one (its window, from profile.json) and the same stretch of the first and third steps is
the unprofiled side, so a drift of the machine over the run cancels. The figure is the
median cost over the repeats; the target is under 5%. Each repeat also prints which
function came first by own time.

    .venv/bin/python bench/profile_overhead.py --repeats 5 --rate 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from pinchpoint import pipeline
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.hot_code import HotCodeServer
from pinchpoint_lab.profile_cost import ProfileCost, profile_cost

TARGET = 0.05


def _plan(server: HotCodeServer, users: int, hold_s: float, rate: int, sampling_s: int) -> str:
    stages = [f"[[load.stage]]\nusers = {users}\nhold = {hold_s}" for _ in range(3)]
    load = "\n".join(['warmup = "0.5s"', *stages])
    return server.plan_text(load, profile=f"step = 1\nduration = {sampling_s}\nrate = {rate}")


def one_run(
    server: HotCodeServer, runs: Path, args: argparse.Namespace
) -> tuple[ProfileCost, float]:
    """The throughput cost of one run, and py-spy's own CPU as a share of the cores."""
    text = _plan(server, args.users, args.hold, args.rate, args.sampling)
    outcome = pipeline.execute(parse_plan(text, "profile_overhead"), text, runs)
    if outcome.warnings:
        print("  warnings:", "; ".join(outcome.warnings))
    app = outcome.verdict.get("profile", {}).get("tiers", {}).get("app", {})
    top = app.get("by_self")
    print(f"  first by own time: {top[0]['function'] if top else 'nothing sampled'}")
    share = app["sampler_cpu_s"] / (app["end"] - app["start"]) / (os.cpu_count() or 1)
    return profile_cost(outcome.run_dir, "app"), share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rate", type=int, default=20, help="py-spy samples per second")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--hold", type=float, default=8.0, help="seconds per step")
    parser.add_argument("--sampling", type=int, default=6, help="seconds py-spy samples")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pinchpoint-profile-bench-"))
    costs: list[ProfileCost] = []
    shares: list[float] = []
    try:
        with HotCodeServer(tmp / "stack", workers=args.workers) as server:
            for i in range(args.repeats):
                cost, share = one_run(server, tmp / "runs", args)
                costs.append(cost)
                shares.append(share)
                print(
                    f"repeat {i + 1}: profiled {cost.profiled_rps:.0f} req/s, unprofiled "
                    f"{cost.unprofiled_rps:.0f} req/s, cost {100 * cost.cost:+.1f}%; py-spy "
                    f"{100 * share:.1f}% of the cores"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    median = statistics.median(c.cost for c in costs)
    verdict = "within" if median < TARGET else "over"
    print(
        f"median cost {100 * median:+.1f}% at {args.rate} Hz ({verdict} the {TARGET:.0%} "
        f"target); py-spy's own CPU {100 * statistics.median(shares):.1f}% of the cores"
    )
    if args.json is not None:
        figures = [
            {"profiled_rps": c.profiled_rps, "unprofiled_rps": c.unprofiled_rps, "cost": c.cost}
            for c in costs
        ]
        summary = {"rate_hz": args.rate, "median": median, "sampler_shares": shares}
        args.json.write_text(json.dumps({**summary, "runs": figures}))


if __name__ == "__main__":
    main()
