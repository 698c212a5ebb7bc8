"""Latency of an agent's real requests while it holds thousands of hostile connections.

Starts `pinchpoint agent` on 127.0.0.1, times --requests authenticated GET
/v1/components (each on a new connection, 20 ms apart) with nothing else connected, then
again while --idle connections that send nothing and --half-sent requests (a head cut
short, or a head whose body never comes, one more byte each every second: slowloris) are
held open. Prints the median, p90 and max of both, the agent's threads and open files, what
it wrote to stderr besides the access lines of the real requests, and when it closed the
half-sent requests (at their 10 s deadline) while keeping the idle ones.

    .venv/bin/python bench/agent_under_siege.py
    .venv/bin/python bench/agent_under_siege.py --idle 3000 --half-sent 500 --requests 200

The siege and the agent process come from the agent's tests (tests/agent).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agent"))

from agent_helpers import TOKEN, AgentProcess, config_text
from siege import Siege, raise_fd_limit, siege, summary, timed_get

ACCESS_LINE = re.compile(r'pinchpoint agent: \S+ "GET /v1/components HTTP/1\.1" 200')
TARGET_MS = 100.0


def timed_requests(url: str, count: int) -> list[float]:
    latencies = []
    for _ in range(count):
        seconds, status = timed_get(url, "/v1/components", TOKEN)
        if status != 200:
            raise SystemExit(f"a real request was answered {status}")
        latencies.append(seconds)
        time.sleep(0.02)
    return latencies


def line(label: str, latencies: list[float]) -> str:
    s = summary(latencies)
    return (
        f"  {label:<12} n={s['n']:<4} median {s['median_ms']:6.2f} ms   "
        f"p90 {s['p90_ms']:6.2f} ms   max {s['max_ms']:7.2f} ms"
    )


def wait_held(process: psutil.Process, at_least: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while process.num_fds() < at_least:
        if time.monotonic() > deadline:
            raise SystemExit(f"the agent holds {process.num_fds()} descriptors, not {at_least}")
        time.sleep(0.05)


def trickle(held: Siege, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        held.trickle()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--half-sent", type=int, default=500)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    if not raise_fd_limit(args.idle + args.half_sent + 512):
        raise SystemExit("the hard limit on open files is too low for this siege")

    with tempfile.TemporaryDirectory(prefix="pinchpoint-siege-") as folder:
        tmp = Path(folder)
        config = tmp / "agent.toml"
        log = {"path": str(tmp / "probe.log"), "format": "probe"}
        config.write_text(config_text([{"name": "app", "log": log}]))
        agent = AgentProcess(config, tmp / "agent.err")
        process = psutil.Process(agent.proc.pid)
        try:
            baseline = timed_requests(agent.url, args.requests)
            with siege(agent.url, args.idle, args.half_sent) as held:
                opened = time.monotonic()
                wait_held(process, args.idle + args.half_sent)
                stop = threading.Event()
                trickler = threading.Thread(target=trickle, args=(held, stop), daemon=True)
                trickler.start()
                cpu_before = process.cpu_times()
                sieged = timed_requests(agent.url, args.requests)
                cpu = sum(process.cpu_times()[:2]) - sum(cpu_before[:2])
                threads, fds = process.num_threads(), process.num_fds()
                during = time.monotonic() - opened
                idle_closed_early = held.closed_by_agent(held.idle)
                half_closed_early = held.closed_by_agent(held.half_sent)
                while held.closed_by_agent(held.half_sent) < args.half_sent:
                    if time.monotonic() - opened > 30:
                        break
                    time.sleep(0.1)
                half_closed_after = time.monotonic() - opened
                half_closed = held.closed_by_agent(held.half_sent)
                idle_held = len(held.idle) - held.closed_by_agent(held.idle)
                stop.set()
                trickler.join()
            time.sleep(0.5)  # every siege connection reset
            after = timed_requests(agent.url, 10)
        finally:
            agent.kill(15)
        stderr = agent.log.read_text().splitlines()

    other = [text for text in stderr if not ACCESS_LINE.fullmatch(text)]
    print(
        f"pinchpoint agent under siege: {args.idle} idle connections + "
        f"{args.half_sent} half-sent requests"
    )
    print("real requests: GET /v1/components, authenticated, a new connection each, 20 ms apart")
    print(line("no siege", baseline))
    print(line("under siege", sieged))
    print(line("after it", after))
    print(
        f"  during the {during:.1f} s of real requests under siege: {threads} agent threads, "
        f"{fds} open files, {cpu:.2f} CPU-s; closed by the agent: "
        f"{idle_closed_early} idle, {half_closed_early} half-sent"
    )
    print(
        f"  half-sent requests closed at their deadline: {half_closed}/{args.half_sent} "
        f"after {half_closed_after:.1f} s (one byte a second each); "
        f"idle connections still held then: {idle_held}/{args.idle}"
    )
    print(
        f"  agent stderr: {len(other)} lines besides the {len(stderr) - len(other)} "
        "access lines of the real requests"
    )
    for text in other[:10]:
        print(f"    {text}")
    worst = summary(sieged)["max_ms"]
    print(
        f"  every real request under siege within {TARGET_MS:.0f} ms: "
        f"{'yes' if worst < TARGET_MS else 'NO'} (max {worst:.2f} ms)"
    )


if __name__ == "__main__":
    main()
