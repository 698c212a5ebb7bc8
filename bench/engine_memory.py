"""Memory of pinchpoint's load engine holding many closed-loop users.

A local nginx on 127.0.0.1 (worker_connections and its open-file limit raised) holds one
keep-alive connection per user; the engine runs the users with a think time between
requests, in this process, while a thread samples this process's resident memory.
Printed: RSS before the run, peak RSS, RSS growth from the first quarter of the run to
its end (a leak shows as growth; the users all connect in the first seconds), requests
and errors, and the memory per user: the peak less the RSS before the run, over the users.
With --wrk, wrk then holds as many connections to the same nginx for as long (no think
time: it has none), and its per connection is its peak RSS (sampled) less that of wrk
with 10 connections. The target is 10,000 users with 1 s think time in under 300 MB.

    .venv/bin/python bench/engine_memory.py --users 10000 --think 1 --seconds 20 --wrk
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

import psutil

from pinchpoint.load.engine import run_steps
from pinchpoint.plan.model import parse_plan

TARGET_MB = 300.0
SAMPLE_S = 0.1

NGINX_CONF = """\
worker_processes 1;
worker_rlimit_nofile {files};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
{user}
events {{ worker_connections {connections}; }}
http {{
  access_log off;
  keepalive_timeout 300s;
  keepalive_requests 100000000;
  client_body_temp_path {dir}; proxy_temp_path {dir}; fastcgi_temp_path {dir};
  uwsgi_temp_path {dir}; scgi_temp_path {dir};
  server {{
    listen 127.0.0.1:{port} backlog=65535;
    location / {{ return 200 "ok"; }}
  }}
}}
"""


def raise_open_files(needed: int) -> int:
    """Raises this process's open-file limit (inherited by nginx) to `needed` if the hard
    limit allows; returns the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(workdir: Path, connections: int, files: int) -> tuple[subprocess.Popen, int]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = workdir / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(
        NGINX_CONF.format(dir=workdir, port=port, user=user, connections=connections, files=files)
    )
    proc = subprocess.Popen([nginx, "-p", str(workdir), "-c", str(conf)])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("nginx did not start")


class RssSampler(threading.Thread):
    """Samples this process's RSS every SAMPLE_S seconds until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process()
        self.samples: list[tuple[float, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.samples.append((time.monotonic(), self.proc.memory_info().rss))
            self.done.wait(SAMPLE_S)


def wrk_peak(port: int, connections: int, seconds: float) -> int:
    """wrk's peak RSS in bytes holding `connections` to nginx for `seconds`, one thread,
    sampled as this process's is (wait4's ru_maxrss would count this process's pages,
    which the child has between its fork and its exec)."""
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not installed (apt-get install wrk)")
    argv = [wrk, "-t", "1", "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s"]
    child = subprocess.Popen(
        [*argv, f"http://127.0.0.1:{port}/"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    watched, peak = psutil.Process(child.pid), 0
    while child.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(SAMPLE_S)
    child.wait()
    return peak


def plan_text(port: int, users: int, seconds: float, think: float, threads: int) -> str:
    return "\n".join(
        [
            "[target]",
            f'url = "http://127.0.0.1:{port}"',
            "tag = true",
            "[load]",
            f"lower = {users}",
            f"upper = {users}",
            f"duration = {seconds!r}",
            "warmup = 0",
            f"think_time = {think!r}",
            "timeout = 10.0",
            f"threads = {threads}",
            "[[request]]",
            'path = "/"',
        ]
    )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--think", type=float, default=1.0, help="think time, seconds")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=0, help="engine threads; 0: one per core")
    ap.add_argument("--wrk", action="store_true", help="then wrk with as many connections")
    args = ap.parse_args()
    if not shutil.which("nginx") and not Path("/usr/sbin/nginx").exists():
        print("nginx is not installed (apt-get install nginx)", file=sys.stderr)
        return 2
    # The users' sockets here and nginx's there, plus a margin for everything else.
    needed = args.users + 1024
    files = raise_open_files(needed)
    if files < needed:
        print(
            f"the open-file limit is {files}, {needed} needed: raise the hard limit (ulimit -Hn)",
            file=sys.stderr,
        )
        return 2
    sampler = RssSampler()
    with tempfile.TemporaryDirectory(prefix="pinchpoint-memory-") as tmp:
        nginx, port = start_nginx(Path(tmp), connections=needed, files=needed)
        try:
            plan = parse_plan(
                plan_text(port, args.users, args.seconds, args.think, args.threads),
                "engine_memory",
            )
            before = psutil.Process().memory_info().rss
            sampler.start()
            started = time.monotonic()
            result = run_steps(plan, "memory", Path(tmp))
            ended = time.monotonic()
            sampler.done.set()
            sampler.join()
            if args.wrk:
                wrk_base = wrk_peak(port, 10, 2.0)
                wrk_full = wrk_peak(port, args.users, args.seconds)
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    step = result.summary["steps"][0]
    samples = sampler.samples
    peak = max(rss for _, rss in samples)
    run_end = started + args.seconds
    quarter = started + args.seconds / 4
    early = [rss for t, rss in samples if quarter <= t <= quarter + 1.0]
    late = [rss for t, rss in samples if run_end - 1.0 <= t <= run_end]
    mb = 1024 * 1024
    errors = {k: v for k, v in step["errors"].items() if v}
    print(
        f"{args.users} users, think {args.think:g} s, {args.seconds:g} s: "
        f"{step['requests']:,} requests ({step['requests'] / args.seconds:,.0f}/s), "
        f"errors {errors or 'none'}, run took {ended - started:.1f} s"
    )
    print(f"RSS before the run   {before / mb:8.1f} MB")
    print(f"RSS peak             {peak / mb:8.1f} MB  (target: under {TARGET_MB:.0f} MB)")
    if early and late:
        growth = statistics.median(late) - statistics.median(early)
        print(
            f"RSS growth           {growth / mb:+8.1f} MB  "
            f"(median of the last second against the second after the first quarter)"
        )
    print(
        f"per user             {(peak - before) / args.users / 1024:8.2f} KiB  (peak less before)"
    )
    if args.wrk:
        print(
            f"wrk peak             {wrk_full / mb:8.1f} MB  ({args.users} connections; "
            f"{(wrk_full - wrk_base) / args.users / 1024:.2f} KiB per connection over "
            f"{wrk_base / mb:.1f} MB at 10)"
        )
    print(f"peak under target: {'yes' if peak / mb < TARGET_MB else 'NO'}")
    return 0 if peak / mb < TARGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
