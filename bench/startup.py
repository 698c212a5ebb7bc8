"""How long the command takes to start: to print `pinchpoint load --help`, and to print
the error of a plan with a typo in `pinchpoint run` (the time a user waits to learn the
plan is wrong). Each command is run --rounds times, alternating, and the median wall time
and CPU time (user + system, of the child) are printed side by side with the time of the
Python interpreter doing nothing, and of a whole 0.2 s `pinchpoint load`. With --compare DIR the same commands also run on the
`python/` folder of another checkout (e.g. `git worktree add /tmp/before HEAD~5`, with
the built `_engine` copied into its `python/pinchpoint/`), so the two figures sit side by
side. Targets: 0.3 s for --help, 0.5 s for the plan error.

Then launch to first request: the time from starting `pinchpoint load URL -c 1` to the
moment a server in this process (loopback, one thread per connection, a 2-byte answer to
each request) reads the first request's head, beside wrk and oha started the same way
(each when installed), in interleaved rounds; the median and the spread are printed, and
each tool's median as a ratio of wrk's. Target: under 0.3 s for pinchpoint.

The children cache their bytecode in a temporary folder, compiled in an untimed first
pass, as an installed package's is: without it (PYTHONDONTWRITEBYTECODE set, or a
read-only checkout) each start compiles pinchpoint's modules again, ~0.07 s more.

    .venv/bin/python bench/startup.py --rounds 9
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TARGETS_S = {"load --help": 0.3, "run <plan with a typo>": 0.5}
FIRST_REQUEST_TARGET_S = 0.3
# How long a tool may take to send its first request before the round counts it as none.
FIRST_REQUEST_LIMIT_S = 10.0
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
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


def _env(python_dir: Path | None, pycache: Path) -> dict[str, str]:
    """The children's environment: bytecode cached in `pycache` (as an installed package
    has its modules compiled), even where PYTHONDONTWRITEBYTECODE is set."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if python_dir is not None:
        env["PYTHONPATH"] = str(python_dir)
    return env


class FirstRequestServer:
    """A loopback HTTP server that notes when the first request head of a round arrives
    and answers every request with 2 bytes on a keep-alive connection."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.first = threading.Event()
        self.first_at = 0.0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def arm(self) -> None:
        self.first.clear()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        pending = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if not self.first.is_set() and b"\r\n\r\n" in pending + data:
                    self.first_at = time.perf_counter()
                    self.first.set()
                pending += data
                heads = pending.count(b"\r\n\r\n")
                pending = pending[pending.rfind(b"\r\n\r\n") + 4 :] if heads else pending
                try:
                    conn.sendall(ANSWER * heads)
                except OSError:
                    return


def _first_request_tools(url: str) -> dict[str, list[str]]:
    """Each installed tool's command for a short load of one connection to url."""
    tools = {
        "pinchpoint load": [
            *[sys.executable, "-m", "pinchpoint", "load", url],
            *["-c", "1", "-d", "0.2", "--threads", "1", "-q"],
        ]
    }
    if wrk := shutil.which("wrk"):
        tools["wrk"] = [wrk, "-c", "1", "-t", "1", "-d", "1s", url]
    if oha := shutil.which("oha"):
        tools["oha"] = [oha, "-c", "1", "-z", "1s", "--no-tui", url]
    return tools


def _first_request(server: FirstRequestServer, argv: list[str], env: dict[str, str]) -> float:
    """Seconds from starting argv to the server reading its first request (nan: none)."""
    server.arm()
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = server.first.wait(FIRST_REQUEST_LIMIT_S)
    try:
        child.wait(timeout=FIRST_REQUEST_LIMIT_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    return server.first_at - start if seen else float("nan")


def first_request_table(rounds: int, trees: dict[str, Path | None], pycache: Path) -> None:
    server = FirstRequestServer()
    tools = _first_request_tools(server.url())
    runs: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, argv in tools.items():
            for tree, python_dir in trees.items() if name == "pinchpoint load" else [("", None)]:
                key = f"{name} ({tree})" if tree else name
                env = _env(python_dir, pycache)
                runs.setdefault(key, []).append(_first_request(server, argv, env))
    wrk = statistics.median(runs["wrk"]) if "wrk" in runs else None
    print(f"\nlaunch to first request, median of {rounds} interleaved rounds")
    print(f"{'tool':<30}{'median s':>10}{'min s':>10}{'max s':>10}{'x wrk':>8}{'target s':>10}")
    for key, times in runs.items():
        median = statistics.median(times)
        ratio = f"{median / wrk:>8.1f}" if wrk else f"{'':>8}"
        target = f"{FIRST_REQUEST_TARGET_S:>10.1f}" if key.startswith("pinchpoint") else ""
        print(f"{key:<30}{median:>10.3f}{min(times):>10.3f}{max(times):>10.3f}{ratio}{target}")
    if "oha" not in runs:
        print("(oha is not installed: not timed)")


def command_table(
    rounds: int, trees: dict[str, Path | None], cases: dict[str, list[str]], pycache: Path
) -> None:
    runs: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for _ in range(rounds):
        for tree, python_dir in trees.items():
            for name, argv in cases.items():
                env = _env(python_dir, pycache)
                runs.setdefault((tree, name), []).append(_timed(argv, env))
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
        pycache = Path(tmp) / "pycache"
        for python_dir in trees.values():  # compiles the bytecode, untimed
            for argv in cases.values():
                _timed(argv, _env(python_dir, pycache))
        command_table(rounds, trees, cases, pycache)
        first_request_table(rounds, trees, pycache)


if __name__ == "__main__":
    main()
