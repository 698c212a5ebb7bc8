"""pinchpoint's load engine against wrk, side by side on one machine.

nginx (one worker, a tiny static response) is pinned to one core; each generator in turn
is pinned to the other core with the same connections and duration, interleaved over
several rounds. Printed per round and as medians: requests/s, generator CPU seconds,
requests per generator CPU-second, and nginx's CPU (to tell which side was saturated).

    .venv/bin/python bench/engine_vs_wrk.py --connections 50 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from pinchpoint.load.plain import plain_load

NGINX_CONF = """\
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
{user}
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {dir}; proxy_temp_path {dir}; fastcgi_temp_path {dir};
  uwsgi_temp_path {dir}; scgi_temp_path {dir};
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    keepalive_requests 100000000;
    location / {{ return 200 "ok"; }}
  }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(workdir: Path, core: int) -> tuple[subprocess.Popen, int]:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = workdir / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(dir=workdir, port=port, user=user))
    proc = subprocess.Popen(
        ["taskset", "-c", str(core), nginx, "-p", str(workdir), "-c", str(conf)]
    )
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("nginx did not start")


def tree_cpu(pid: int) -> float:
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        t = p.cpu_times()
        total += t.user + t.system
    return total


def run_wrk(url: str, connections: int, seconds: float, core: int) -> dict:
    argv = ["taskset", "-c", str(core), "wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", url]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read() if proc.stdout else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    total = int(re.search(r"(\d+) requests in", out).group(1))
    elapsed = float(re.search(r"requests in ([\d.]+)s", out).group(1))
    return {"requests": total, "seconds": elapsed, "cpu_s": usage.ru_utime + usage.ru_stime}


def run_pinchpoint(url: str, connections: int, seconds: float, core: int) -> dict:
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        cpu0 = time.process_time()
        summary = plain_load(url, connections, seconds, threads=1)
        cpu = time.process_time() - cpu0
    finally:
        os.sched_setaffinity(0, before)
    return {"requests": summary["requests"], "seconds": summary["duration_s"], "cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    results: dict[str, list[dict]] = {"wrk": [], "pinchpoint": []}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-bench-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=0)
        url = f"http://127.0.0.1:{port}/"
        try:
            for r in range(args.rounds):
                for name, runner in (("wrk", run_wrk), ("pinchpoint", run_pinchpoint)):
                    n0 = tree_cpu(nginx.pid)
                    got = runner(url, args.connections, args.seconds, 1)
                    got["nginx_cores"] = (tree_cpu(nginx.pid) - n0) / got["seconds"]
                    got["rps"] = got["requests"] / got["seconds"]
                    got["per_cpu_s"] = got["requests"] / got["cpu_s"]
                    results[name].append(got)
                    print(
                        f"round {r + 1} {name:>10}: {got['rps']:>9,.0f} req/s  "
                        f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                        f"generator {got['cpu_s'] / got['seconds']:.2f} cores  nginx {got['nginx_cores']:.2f} cores"
                    )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    med = {
        n: {k: statistics.median(x[k] for x in rs) for k in ("rps", "per_cpu_s", "nginx_cores")}
        for n, rs in results.items()
    }
    print()
    for n, m in med.items():
        print(
            f"median {n:>10}: {m['rps']:>9,.0f} req/s  {m['per_cpu_s']:>9,.0f} req per CPU-s  nginx {m['nginx_cores']:.2f} cores"
        )
    print(
        f"ratio pinchpoint/wrk: {med['pinchpoint']['rps'] / med['wrk']['rps']:.2f}x req/s, "
        f"{med['pinchpoint']['per_cpu_s'] / med['wrk']['per_cpu_s']:.2f}x req per generator CPU-second"
    )
    for n, m in med.items():
        if m["nginx_cores"] >= 0.9:
            print(
                f"note: with {n}, nginx used {m['nginx_cores']:.2f} of its core: the target was the limit"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
