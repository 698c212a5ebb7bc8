"""pinchpoint's HTTP/2 (h2c) against h2load, side by side on one machine.

nginx (one worker, `return 200 "ok"`, h2c by prior knowledge) is pinned to one core; each
generator in turn to the other, with 50 connections carrying 1 stream each, then 10
streams each (500 requests in flight), interleaved over several rounds. Both count their
whole process's CPU by wait4 (pinchpoint's start-up and summary included: ~0.3 CPU-s
whatever the round's length, hence rounds of 10 s). Printed per
round and as medians: requests/s, requests per generator CPU-second, nginx's CPU (which
side was the limit), then pinchpoint's ratio to h2load.

    .venv/bin/python bench/h2_vs_h2load.py --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from engine_vs_wrk import measure, pinchpoint_child, start_nginx

CONNECTIONS = 50
STREAMS = (1, 10)


def run_h2load(url: str, streams: int, seconds: float, core: int) -> dict:
    argv = ["taskset", "-c", str(core), "h2load", "-t1", f"-c{CONNECTIONS}", f"-m{streams}"]
    proc = subprocess.Popen(
        [*argv, "-D", f"{seconds:g}", url],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"h2load exited {status}: {out[-500:]}")
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    elapsed = float(re.search(r"finished in ([\d.]+)s", out).group(1))
    return {"requests": done, "seconds": elapsed, "cpu_s": usage.ru_utime + usage.ru_stime}


def run_pinchpoint(url: str, streams: int, seconds: float, core: int, tmp: Path) -> dict:
    plan = tmp / f"h2-{streams}.toml"
    plan.write_text(
        f'[target]\nurl = "{url.rstrip("/")}"\nhttp = "2"\nstreams_per_connection = {streams}\n'
        f"[load]\nusers = {CONNECTIONS * streams}\nduration = {seconds!r}\nwarmup = 0\n"
        'threads = 1\n[[request]]\npath = "/"\n'
    )
    summary = pinchpoint_child([str(plan)], core)
    return {
        "requests": summary["requests"],
        "seconds": summary["duration_s"],
        "cpu_s": summary["cpu_s"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    if not shutil.which("h2load"):
        print("h2load is not installed (apt-get install nghttp2-client)", file=sys.stderr)
        return 2
    results: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-h2-") as tmp:
        nginx, port = start_nginx(Path(tmp), core=0, http2=True)
        url = f"http://127.0.0.1:{port}/"
        runners = {
            "h2load": run_h2load,
            "pinchpoint": lambda u, s, d, c: run_pinchpoint(u, s, d, c, Path(tmp)),
        }
        try:
            for r in range(max(1, min(args.rounds, 20))):
                for streams in STREAMS:
                    for name, runner in runners.items():
                        got = measure(
                            lambda u, s, d, c, run=runner: run(u, s, d, c),
                            url,
                            streams,
                            args.seconds,
                            nginx.pid,
                        )
                        results.setdefault((name, streams), []).append(got)
                        print(
                            f"round {r + 1} {name:>10} x{streams:<2}: {got['rps']:>9,.0f} req/s  "
                            f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                            f"generator {got['gen_cores']:.2f} cores  "
                            f"nginx {got['nginx_cores']:.2f}",
                            flush=True,
                        )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    print()
    for streams in STREAMS:
        med = {
            name: {
                k: statistics.median(x[k] for x in results[(name, streams)])
                for k in ("rps", "per_cpu_s", "nginx_cores")
            }
            for name in ("h2load", "pinchpoint")
        }
        for name, m in med.items():
            print(
                f"median {name:>10} {CONNECTIONS}x{streams:<2}: {m['rps']:>9,.0f} req/s  "
                f"{m['per_cpu_s']:>9,.0f} req per CPU-s  nginx {m['nginx_cores']:.2f}"
            )
        ratio = med["pinchpoint"]["per_cpu_s"] / med["h2load"]["per_cpu_s"]
        print(
            f"pinchpoint / h2load, {CONNECTIONS}x{streams}: {ratio:.2f}x per generator CPU-second"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
