"""How long the command takes to start: to print `pinchpoint load --help`, and to print
the error of a plan with a typo in `pinchpoint run` (the time a user waits to learn the
plan is wrong). Each command is run --rounds times, alternating, and the median wall time
and CPU time (user + system, of the child) are printed side by side with the time of the
Python interpreter doing nothing, and of a whole 0.2 s `pinchpoint load`. With --compare DIR the same commands also run on the
`python/` folder of another checkout (e.g. `git worktree add /tmp/before HEAD~5`), so the
two figures sit side by side. Targets: 0.3 s for --help, 0.5 s for the plan error.

    .venv/bin/python bench/startup.py --rounds 9
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS_S = {"load --help": 0.3, "run <plan with a typo>": 0.5}
TYPO_PLAN = """\
[target]
url = "http://127.0.0.1:9/"

[load]
users = 1
duraton = "1s"

[[request]]
path = "/"
"""


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, child CPU seconds and exit code of one run of argv."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def _cases(plan: Path) -> dict[str, list[str]]:
    cli = [sys.executable, "-m", "pinchpoint"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "load --help": [*cli, "load", "--help"],
        "run <plan with a typo>": [*cli, "run", str(plan)],
        "load <url with port 99999>": [*cli, "load", "http://127.0.0.1:99999/"],
        # A whole short load (0.2 s of refused connections): start-up, run and summary.
        "load <refused url> -d 0.2": [
            *cli,
            "load",
            "http://127.0.0.1:1/",
            "-d",
            "0.2",
            "-c",
            "1",
            "-q",
        ],
    }


def _env(python_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if python_dir is not None:
        env["PYTHONPATH"] = str(python_dir)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="runs of each command")
    parser.add_argument(
        "--compare", type=Path, help="another checkout whose python/ to time beside this one"
    )
    args = parser.parse_args()
    rounds = max(1, min(args.rounds, 100))
    trees: dict[str, Path | None] = {"this": None}
    if args.compare is not None:
        trees["compare"] = args.compare.resolve() / "python"
    with tempfile.TemporaryDirectory(prefix="pinchpoint-startup-") as tmp:
        plan = Path(tmp) / "plan.toml"
        plan.write_text(TYPO_PLAN)
        cases = _cases(plan)
        runs: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for _ in range(rounds):
            for tree, python_dir in trees.items():
                for name, argv in cases.items():
                    runs.setdefault((tree, name), []).append(_timed(argv, _env(python_dir)))
    header = f"{'command':<30}" + "".join(
        f"{tree + ' wall s':>17}{tree + ' cpu s':>16}" for tree in trees
    )
    print(f"median of {rounds} runs; the exit code is the last run's")
    print(header + f"{'target s':>10}{'exit':>6}")
    for name in cases:
        row = f"{name:<30}"
        for tree in trees:
            results = runs[(tree, name)]
            row += f"{statistics.median(r[0] for r in results):>17.3f}"
            row += f"{statistics.median(r[1] for r in results):>16.3f}"
        target = TARGETS_S.get(name)
        row += f"{target:>10.1f}" if target else f"{'':>10}"
        print(row + f"{runs[('this', name)][-1][2]:>6}")


if __name__ == "__main__":
    main()
