"""What counting each record by kind costs the generator, side by side in one run.

nginx (one worker, `return 200`) is pinned to the last core; `pinchpoint load URL -c 50
--threads 1` is pinned to the others and run from this checkout and from another one
(`--compare DIR`: its `python/` folder, with its own built `_engine`), interleaved over
several rounds. Each run's requests come from its `--json` summary, its CPU (every
thread's: the engine's recorder counts the kinds) from wait4. Printed per round and as
medians: requests/s, requests per generator CPU-second, and this checkout's ratio to
the other's.

    .venv/bin/python bench/kinds_cost.py --compare ../before --seconds 5 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine_vs_wrk import start_nginx


def _run(argv: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """(requests, wall s, CPU s) of one `pinchpoint load --json`."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} failed")
    return int(json.loads(out)["requests"]), wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=Path, required=True, help="the checkout before")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, 20))
    seconds = max(1.0, min(args.seconds, 60.0))
    trees = {"this": None, "before": str(args.compare.resolve() / "python")}
    last = (os.cpu_count() or 2) - 1
    cores = ",".join(str(c) for c in range(last)) or "0"
    figures: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-kinds-cost-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=last)
        try:
            argv = ["taskset", "-c", cores, sys.executable, "-m", "pinchpoint", "load",
                    f"http://127.0.0.1:{port}/", "-c", "50", "-d", f"{seconds:g}",
                    "--threads", "1", "--json"]  # fmt: skip
            for round_ in range(rounds):
                line = []
                for tree, python_dir in trees.items():
                    env = dict(os.environ)
                    if python_dir is not None:
                        env["PYTHONPATH"] = python_dir
                    requests, wall, cpu = _run(argv, env)
                    figures[tree].append((requests / wall, requests / cpu))
                    line.append(f"{tree} {requests / wall:,.0f} req/s {requests / cpu:,.0f}/CPU-s")
                print(f"round {round_ + 1}: " + "; ".join(line), flush=True)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    print(f"medians of {rounds} interleaved rounds of {seconds:g} s")
    for tree, values in figures.items():
        rate = statistics.median(v[0] for v in values)
        per_cpu = statistics.median(v[1] for v in values)
        print(f"{tree:>7}: {rate:,.0f} req/s, {per_cpu:,.0f} requests per CPU-second")
    ratios = [t[1] / b[1] for t, b in zip(figures["this"], figures["before"], strict=True)]
    print(
        f"this / before per CPU-second: median {statistics.median(ratios):.3f} "
        f"(rounds {min(ratios):.3f}–{max(ratios):.3f})"
    )


if __name__ == "__main__":
    main()
