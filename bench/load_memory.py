"""Peak memory of a whole `pinchpoint load` (start, run, summary) against its requests:
a 1 s run and a 10 s one, closed loop (`-c`) and open loop (`--rate`, whose
send lag the engine keeps as a histogram too), beside wrk run for as long with as many
connections. The summary is summed from the engine's histograms, so the peak should
not grow with the requests.

A local nginx (`return 200`) is pinned to the last core, the generators to the others.
Each child's peak RSS is its own (`ru_maxrss` from wait4); rounds are interleaved and
the medians printed. With --compare DIR the same loads also run on the `python/` folder
of another checkout (with the built `_engine` copied into its `python/pinchpoint/`).

    .venv/bin/python bench/load_memory.py --rounds 3
    .venv/bin/python bench/load_memory.py --rounds 3 --open 1 25000 --open 80 25000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from engine_vs_wrk import start_nginx

# (seconds, closed-loop connections, open-loop rate): ~10k and ~250k requests each.
SIZES = ((1.0, 10, 10_000.0), (10.0, 10, 25_000.0))


def _peak(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The child's peak RSS in bytes and its standard output."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    if child.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {child.returncode}")
    return usage.ru_maxrss * 1024, text


def _cases(
    url: str, cores: str, sizes: list[tuple[float, int, float]], open_only: bool
) -> dict[str, tuple[list[str], bool]]:
    """Each load by name: its command and whether it is pinchpoint's."""
    pin = ["taskset", "-c", cores]
    load = [*pin, sys.executable, "-m", "pinchpoint", "load", url, "-q", "--json"]
    cases: dict[str, tuple[list[str], bool]] = {}
    for seconds, connections, rate in sizes:
        if not open_only:
            cases[f"closed -c {connections} -d {seconds:g}"] = (
                [*load, "-c", str(connections), "-d", str(seconds)],
                True,
            )
        cases[f"open --rate {rate:g} -d {seconds:g}"] = (
            [*load, "--rate", str(rate), "-d", str(seconds)],
            True,
        )
        if not open_only and (wrk := shutil.which("wrk")):
            cases[f"wrk -c {connections} -d {seconds:g}"] = (
                [*pin, wrk, "-c", str(connections), "-t", "1", "-d", f"{seconds:g}s", url],
                False,
            )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compare", type=Path, help="another checkout to run beside this")
    parser.add_argument(
        "--open",
        nargs=2,
        type=float,
        action="append",
        metavar=("SECONDS", "RATE"),
        help="open-loop loads only, each of SECONDS at RATE requests/s (repeatable)",
    )
    args = parser.parse_args()
    sizes = [(s, 10, r) for s, r in args.open] if args.open else list(SIZES)
    rounds = max(1, min(args.rounds, 20))
    trees: dict[str, Path | None] = {"this": None}
    if args.compare is not None:
        trees["compare"] = args.compare.resolve() / "python"
    last = (os.cpu_count() or 2) - 1
    cores = ",".join(str(c) for c in range(last)) or "0"
    peaks: dict[tuple[str, str], list[int]] = {}
    requests: dict[tuple[str, str], int] = {}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-load-memory-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=last)
        try:
            cases = _cases(f"http://127.0.0.1:{port}/", cores, sizes, bool(args.open))
            for _ in range(rounds):
                for name, (argv, ours) in cases.items():
                    for tree, python_dir in trees.items() if ours else [("", None)]:
                        env = dict(os.environ)
                        if python_dir is not None:
                            env["PYTHONPATH"] = str(python_dir)
                        peak, out = _peak(argv, env)
                        peaks.setdefault((name, tree), []).append(peak)
                        if ours:
                            requests[(name, tree)] = int(json.loads(out)["requests"])
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    print(f"peak RSS, median of {rounds} interleaved rounds; requests of the last round")
    print(f"{'load':<32}{'tree':>9}{'requests':>11}{'peak MB':>10}")
    for (name, tree), values in peaks.items():
        sent = requests.get((name, tree))
        print(
            f"{name:<32}{tree:>9}{'' if sent is None else sent:>11}"
            f"{statistics.median(values) / 1e6:>10.1f}"
        )


if __name__ == "__main__":
    main()
