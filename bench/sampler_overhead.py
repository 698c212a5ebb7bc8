"""CPU cost of the resource sampler itself.

Starts a realistic set of targets: 3 components of 10 processes each (a Python parent
that listens on a loopback port, holds 5 connections to itself open, both ends, and
starts 9 sleeping children; --components, --processes, --connections change that),
selected by pid file as a plan does, and samples them, the host and this process at each
rate for --seconds. The CPU time the sampler's thread spends taking samples
(time.thread_time around each sample, in that thread) over the wall time is its share of
one core. The target is under 1% of a core at 1 Hz.

    .venv/bin/python bench/sampler_overhead.py --seconds 30
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler

TARGET_SHARE = 0.01

# A listening server with a few connections to itself, and sleeping children: the shape of
# a pre-fork server (master + workers) as far as the sampler is concerned.
_TARGET = textwrap.dedent(
    """
    import os, resource, socket, subprocess, sys, time
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(int(sys.argv[3]) + 64)
    clients = [socket.create_connection(server.getsockname()) for _ in range(int(sys.argv[3]))]
    accepted = [server.accept()[0] for _ in clients]
    kids = [subprocess.Popen(["sleep", "3600"]) for _ in range(int(sys.argv[2]) - 1)]
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(str(os.getpid()))
    print("ready", flush=True)
    sys.stdin.read()
    """
)


@contextlib.contextmanager
def targets(
    folder: Path, components: int = 3, processes: int = 10, connections: int = 5
) -> Iterator[dict[str, ProcessSelector]]:
    """Running targets, selected by pid file; killed with their children after."""
    procs = []
    selectors = {}
    try:
        for i in range(components):
            pid_file = folder / f"c{i}.pid"
            proc = subprocess.Popen(
                [sys.executable, "-c", _TARGET, str(pid_file), str(processes), str(connections)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            procs.append(proc)
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            selectors[f"component{i}"] = ProcessSelector(pid_file=pid_file)
        yield selectors
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


class Timed:
    """Wraps a sampler's sample method to add up the CPU time its own thread spends in it."""

    def __init__(self, sampler: ResourceSampler) -> None:
        self.cpu_s = 0.0
        self.samples = 0
        self.counting = False
        self._inner = sampler._sample
        sampler._sample = self  # type: ignore[method-assign]

    def __call__(self, emit: bool) -> None:
        start = time.thread_time()
        self._inner(emit)
        if self.counting and threading.current_thread().name == "pinchpoint-resources":
            self.cpu_s += time.thread_time() - start
            self.samples += 1


def measure(selectors: dict[str, ProcessSelector], hz: float, seconds: float) -> dict:
    """The sampler's CPU share of one core at `hz` samples per second over `seconds`."""
    sampler = ResourceSampler(selectors, interval_s=1.0 / hz)
    timed = Timed(sampler)
    sampler.start()
    time.sleep(0.5 / hz)  # between two samples
    timed.counting, wall0 = True, time.monotonic()
    time.sleep(seconds)
    timed.counting, wall1 = False, time.monotonic()
    sampler.stop()
    return {
        "hz": hz,
        "samples": timed.samples,
        "share": timed.cpu_s / (wall1 - wall0),
        "ms_per_sample": 1000 * timed.cpu_s / max(timed.samples, 1),
        "processes": sum(
            row["processes"]
            for row in sampler.rows()[-len(selectors) - 2 :]
            if row["component"] != "host"
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per rate (default 30)")
    parser.add_argument("--rates", type=float, nargs="+", default=[1.0, 10.0], help="Hz")
    parser.add_argument("--components", type=int, default=3)
    parser.add_argument("--processes", type=int, default=10, help="per component")
    parser.add_argument("--connections", type=int, default=5, help="per component")
    args = parser.parse_args()
    print(
        f"{args.components} components of {args.processes} processes "
        f"({args.connections} connections each), host and generator; "
        f"{len(psutil.pids())} processes and {len(psutil.net_connections('tcp'))} TCP sockets "
        f"on this host, {psutil.cpu_count()} CPUs; {args.seconds:g} s per rate"
    )
    with (
        tempfile.TemporaryDirectory(prefix="pp-sampler-") as tmp,
        targets(Path(tmp), args.components, args.processes, args.connections) as sel,
    ):
        results = [measure(sel, hz, args.seconds) for hz in args.rates]
    for r in results:
        verdict = "ok" if r["share"] < TARGET_SHARE else "over the 1% target"
        print(
            f"{r['hz']:>5g} Hz: {100 * r['share']:.2f}% of a core "
            f"({r['ms_per_sample']:.2f} ms CPU per sample, {r['samples']:.0f} samples, "
            f"{r['processes']} processes sampled) {verdict}"
        )
    return 0 if results and results[0]["share"] < TARGET_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())
