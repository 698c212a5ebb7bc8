"""pinchpoint's load engine against wrk, Locust and k6, side by side on one machine.

nginx (one worker, a tiny static response) is pinned to one core; each generator in turn
is pinned to the other core with the same connections and duration, interleaved over
several rounds. Printed per round and as medians: requests/s, generator CPU seconds,
requests per generator CPU-second, nginx's CPU (to tell which side was saturated) and the
whole machine's busy cores (on a shared machine, other work can take the cores from both),
then each tool's ratios to wrk. pinchpoint runs as `pinchpoint load` in a child, its
whole process's CPU read by wait4 as wrk's and k6's are (start-up and the summary
included), its modules' bytecode compiled beforehand as an installed package's is;
Locust's is read between the marks of its log (see other_generators.py).

Locust (FastHttpUser, headless, one process) and k6 are installed the first time under
.tools/ (see bench/other_generators.py); one that does not install is left out with the
reason. --skip-others runs only wrk and pinchpoint.

    .venv/bin/python bench/engine_vs_wrk.py --connections 50 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import json
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
from other_generators import Runner, other_runners

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
    listen 127.0.0.1:{port} backlog=4096{http2};
    keepalive_requests 100000000;
{locations}
  }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_nginx(
    workdir: Path,
    core: int,
    locations: str = '    location / { return 200 "ok"; }',
    http2: bool = False,
) -> tuple[subprocess.Popen, int]:
    """nginx pinned to `core` on a free port; with `http2`, h2c (prior knowledge) only."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    conf = workdir / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(
        NGINX_CONF.format(
            dir=workdir,
            port=port,
            user=user,
            locations=locations,
            http2=" http2" if http2 else "",
        )
    )
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


def host_busy() -> float:
    """CPU seconds the whole machine has been busy, all cores together."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


def measure(runner: Runner, url: str, connections: int, seconds: float, nginx_pid: int) -> dict:
    """One run of one generator on core 1, with nginx's and the whole machine's CPU."""
    n0, h0, w0 = tree_cpu(nginx_pid), host_busy(), time.monotonic()
    got = runner(url, connections, seconds, 1)
    got["host_cores"] = (host_busy() - h0) / (time.monotonic() - w0)
    got["nginx_cores"] = (tree_cpu(nginx_pid) - n0) / got["seconds"]
    got["gen_cores"] = got["cpu_s"] / got["seconds"]
    got["rps"] = got["requests"] / got["seconds"]
    got["per_cpu_s"] = got["requests"] / got["cpu_s"]
    return got


def run_wrk(url: str, connections: int, seconds: float, core: int) -> dict:
    argv = ["taskset", "-c", str(core), "wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", url]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read() if proc.stdout else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    total = int(re.search(r"(\d+) requests in", out).group(1))
    elapsed = float(re.search(r"requests in ([\d.]+)s", out).group(1))
    return {"requests": total, "seconds": elapsed, "cpu_s": usage.ru_utime + usage.ru_stime}


@functools.cache
def compile_bytecode() -> None:
    """pinchpoint's modules compiled into their `__pycache__`, as installing the package
    compiles them. Where PYTHONDONTWRITEBYTECODE is set, a checkout's are never written,
    and each start of the child would compile them again (~0.05 s of its CPU)."""
    import pinchpoint

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    package = str(Path(pinchpoint.__file__).parent)
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], env=env, check=True)


def pinchpoint_child(args: list[str], core: int) -> dict:
    """`pinchpoint load <args> --json -q` in a child pinned to `core`: its summary, and in
    `cpu_s` the whole child's CPU time from wait4 (start-up, run, summary, exit), counted
    as a peer's process is."""
    compile_bytecode()
    argv = ["taskset", "-c", str(core), sys.executable, "-m", "pinchpoint", "load", *args]
    proc = subprocess.Popen([*argv, "--json", "-q"], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"pinchpoint load exited {proc.returncode}")
    return {**json.loads(out), "cpu_s": usage.ru_utime + usage.ru_stime}


def run_pinchpoint(url: str, connections: int, seconds: float, core: int) -> dict:
    args = [url, "-c", str(connections), "-d", f"{seconds:g}", "--threads", "1"]
    summary = pinchpoint_child(args, core)
    return {
        "requests": summary["requests"],
        "seconds": summary["duration_s"],
        "cpu_s": summary["cpu_s"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--skip-others", action="store_true", help="run only wrk and pinchpoint (no Locust, k6)"
    )
    args = ap.parse_args()
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pinchpoint-bench-") as tmp:
        runners = {"wrk": run_wrk, "pinchpoint": run_pinchpoint}
        if not args.skip_others:
            runners |= other_runners(Path(tmp))
        results: dict[str, list[dict]] = {name: [] for name in runners}
        nginx, port = start_nginx(Path(tmp), core=0)
        url = f"http://127.0.0.1:{port}/"
        try:
            for r in range(args.rounds):
                for name, runner in runners.items():
                    try:
                        got = measure(runner, url, args.connections, args.seconds, nginx.pid)
                    except RuntimeError as e:
                        if name in ("wrk", "pinchpoint"):
                            raise
                        print(f"round {r + 1} {name:>10}: failed, left out: {e}", flush=True)
                        continue
                    results[name].append(got)
                    print(
                        f"round {r + 1} {name:>10}: {got['rps']:>9,.0f} req/s  "
                        f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                        f"generator {got['gen_cores']:.2f} cores  nginx {got['nginx_cores']:.2f}  "
                        f"host {got['host_cores']:.2f} of {ncpu}",
                        flush=True,
                    )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    keys = ("rps", "per_cpu_s", "nginx_cores", "gen_cores", "host_cores")
    med = {
        n: {k: statistics.median(x[k] for x in rs) for k in keys} for n, rs in results.items() if rs
    }
    print()
    for n, m in med.items():
        print(
            f"median {n:>10}: {m['rps']:>9,.0f} req/s  {m['per_cpu_s']:>9,.0f} req per CPU-s  "
            f"generator {m['gen_cores']:.2f} cores  nginx {m['nginx_cores']:.2f}  "
            f"host {m['host_cores']:.2f} of {ncpu}"
        )
    print()
    for n, m in med.items():
        if n != "wrk":
            print(
                f"ratio {n + '/wrk':>14}: {m['rps'] / med['wrk']['rps']:.2f}x req/s, "
                f"{m['per_cpu_s'] / med['wrk']['per_cpu_s']:.2f}x req per generator CPU-second"
            )
    for n, m in med.items():
        if m["nginx_cores"] >= 0.9:
            print(
                f"note: with {n}, nginx used {m['nginx_cores']:.2f} of its core: the target was the limit"
            )
        elif m["gen_cores"] >= 0.9:
            print(
                f"note: with {n}, the generator used {m['gen_cores']:.2f} of its core and nginx "
                f"{m['nginx_cores']:.2f}: the generator was the limit"
            )
        else:
            others = m["host_cores"] - m["gen_cores"] - m["nginx_cores"]
            why = (
                f"other work on the machine took ~{others:.2f} cores, so contention set the pace"
                if others >= 0.5
                else "latency-bound"
            )
            print(
                f"note: with {n}, neither side was near a full core (generator "
                f"{m['gen_cores']:.2f}, nginx {m['nginx_cores']:.2f}): {why}; "
                "compare requests per generator CPU-second"
            )
    for n, rs in results.items():
        if not rs:
            print(f"note: {n} produced no round")
    return 0


if __name__ == "__main__":
    sys.exit(main())
