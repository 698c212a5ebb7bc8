"""`--find-knee` against the full step plan, on the demo stack, over the same range.

Runs `pinchpoint demo` with the step plan (`-l L -u U -s S -t T`) and with `--find-knee`
(`-l L -u U -t T`), interleaved, for a few rounds, and prints for each run its verdict,
the load time (the sum of its steps' windows in run.json) and the wall time of the command
(stack start-up and analysis included); then the median ratio of load time, search over
step plan.

    .venv/bin/python bench/find_knee.py --lower 1 --upper 16 --step 1 --seconds 3 --rounds 3

The search must reach the same verdict: the same component and resource, from a number of
users inside the bracket it reports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_demo(args: argparse.Namespace, find_knee: bool, runs_dir: Path) -> dict:
    argv = [sys.executable, "-m", "pinchpoint", "demo", "--workers", str(args.workers)]
    argv += ["-l", str(args.lower), "-u", str(args.upper), "-t", f"{args.seconds:g}"]
    argv += ["--find-knee"] if find_knee else ["-s", str(args.step)]
    out = runs_dir / ("knee" if find_knee else "steps")
    argv += ["--runs-dir", str(out), "--quiet"]
    began = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed:\n{done.stderr[-3000:]}")
    run_dir = max(out.iterdir(), key=lambda p: p.stat().st_mtime)
    run = json.loads((run_dir / "run.json").read_text())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    b = verdict.get("bottleneck") or {}
    search = run.get("find_knee") or {}
    return {
        "mode": "find-knee" if find_knee else "step plan",
        "steps": len(run["steps"]),
        "users": [s["users"] for s in sorted(run["steps"], key=lambda s: s.get("order", 0))],
        "load_s": sum(s["end"] - s["start"] for s in run["steps"]),
        "wall_s": wall,
        "verdict": (b.get("component"), b.get("resource"), b.get("starts_at_users")),
        "headline": verdict.get("headline", ""),
        "bracket": search.get("bracket"),
    }


def same_verdict(plan: dict, search: dict) -> bool:
    if plan["verdict"][:2] != search["verdict"][:2] or search["bracket"] is None:
        return False
    low, high = search["bracket"]
    onset = search["verdict"][2]
    return onset is not None and low <= onset <= high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lower", type=int, default=1)
    parser.add_argument("--upper", type=int, default=16)
    parser.add_argument("--step", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rows: list[tuple[dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="pinchpoint-bench-") as tmp:
        for n in range(args.rounds):
            # Interleaved, and the order alternated, so a slow spell hits both alike.
            first_knee = n % 2 == 1
            a = run_demo(args, first_knee, Path(tmp) / str(n))
            b = run_demo(args, not first_knee, Path(tmp) / str(n))
            plan, search = (b, a) if first_knee else (a, b)
            rows.append((plan, search))
            for r in (plan, search):
                print(
                    f"round {n + 1} {r['mode']:>9}: {r['steps']:2d} steps {r['users']}, "
                    f"load {r['load_s']:5.1f} s, wall {r['wall_s']:5.1f} s — {r['headline']}"
                    + (f" (bracket {r['bracket']})" if r["bracket"] else ""),
                    flush=True,
                )
    load_ratio = statistics.median(s["load_s"] / p["load_s"] for p, s in rows)
    wall_ratio = statistics.median(s["wall_s"] / p["wall_s"] for p, s in rows)
    agree = sum(same_verdict(p, s) for p, s in rows)
    print(
        f"\nfind-knee / step plan, median of {len(rows)} rounds: load time {load_ratio:.2f}×, "
        f"wall time {wall_ratio:.2f}×; same verdict (component, resource, onset in the "
        f"bracket) in {agree} of {len(rows)} rounds"
    )


if __name__ == "__main__":
    main()
