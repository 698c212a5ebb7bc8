"""Requests per generator CPU-second of a locustfile run through pinchpoint (`[load]
locustfile`: Locust in a child process, every request tagged and recorded), beside the
engine sending the same GET.

nginx (one worker, `return 200 "ok"`) is pinned to one core, the generator to the other
(the Locust child inherits the pinning). Loads, interleaved over several rounds, each
`--users` users for `--seconds` with no wait between requests:
- engine: the Rust engine, one GET (run_steps);
- locust-http: an HttpUser (python-requests) sending the GET;
- locust-fast: a FastHttpUser (geventhttpclient) sending the GET.
The generator's CPU is this process's and, for Locust, the child's (reaped, so counted
in RUSAGE_CHILDREN); the child's start (importing Locust and the locustfile) is measured
apart by a check-only start and printed, and is included in the per CPU-second figure.

    .venv/bin/python bench/locust_throughput.py --users 20 --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine_vs_wrk import start_nginx

from pinchpoint.load.engine import run_steps
from pinchpoint.load.locust_steps import check_locustfile, run_locust
from pinchpoint.plan.model import Plan, parse_plan

LOCUSTFILES = {
    "locust-http": "from locust import HttpUser as Base, task\n",
    "locust-fast": "from locust import FastHttpUser as Base, task\n",
}
USER = """
class Get(Base):
    @task
    def get(self):
        self.client.get("/plain", name="plain")
"""
LOCATIONS = '    location = /plain { return 200 "ok"; }'


def plan_of(url: str, users: int, seconds: float, locustfile: Path | None) -> Plan:
    load = f'users = {users}\nduration = "{seconds:g}s"\nwarmup = "0s"\nthreads = 1\ntimeout = "5s"'
    if locustfile is not None:
        load += f'\nlocustfile = "{locustfile}"'
    text = f'[target]\nurl = "{url}"\n\n[load]\n{load}\n\n[[request]]\npath = "/plain"\n'
    return parse_plan(text, "bench.toml")


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def run_one(plan: Plan, workdir: Path, core: int) -> dict:
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        cpu0, wall0 = _cpu(), time.monotonic()
        if plan.load.locustfile is not None:
            result = run_locust(plan, run_dir.name, run_dir)
        else:
            result = run_steps(plan, run_dir.name, run_dir)
        cpu, wall = _cpu() - cpu0, time.monotonic() - wall0
    finally:
        os.sched_setaffinity(0, before)
    steps = result.summary["steps"]
    requests = sum(s["requests"] for s in steps)
    errors = sum(sum(s["errors"].values()) for s in steps)
    seconds = sum((b - a) / 1e6 for a, b in result.summary["windows"])
    return {
        "rps": requests / seconds,
        "per_cpu_s": requests / cpu,
        "errors": errors,
        "requests": requests,
        "gen_cores": cpu / wall,
    }


def start_cost(plan: Plan, core: int) -> float:
    """CPU seconds of a check-only start of the Locust child (import, locustfile)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        cpu0 = _cpu()
        check_locustfile(plan, "bench")
        return _cpu() - cpu0
    finally:
        os.sched_setaffinity(0, before)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    kinds = ("engine", *LOCUSTFILES)
    results: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-locust-bench-") as tmp:
        workdir = Path(tmp)
        files = {}
        for kind, head in LOCUSTFILES.items():
            files[kind] = workdir / f"{kind.replace('-', '_')}.py"
            files[kind].write_text(head + USER)
        nginx, port = start_nginx(workdir, core=0, locations=LOCATIONS)
        url = f"http://127.0.0.1:{port}"
        try:
            for kind in LOCUSTFILES:
                cost = start_cost(plan_of(url, 1, 1, files[kind]), core=1)
                print(f"{kind}: the child's start costs {cost:.2f} CPU-s", flush=True)
            for r in range(args.rounds):
                for kind in kinds:
                    plan = plan_of(url, args.users, args.seconds, files.get(kind))
                    got = run_one(plan, workdir, core=1)
                    if got["errors"]:
                        print(f"{kind}: {got['errors']} of {got['requests']} requests failed")
                        return 1
                    results[kind].append(got)
                    print(
                        f"round {r + 1} {kind:>11}: {got['rps']:>9,.0f} req/s  "
                        f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                        f"generator {got['gen_cores']:.2f} cores",
                        flush=True,
                    )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    print()
    for kind, rs in results.items():
        rps = statistics.median(x["rps"] for x in rs)
        per_cpu = statistics.median(x["per_cpu_s"] for x in rs)
        print(f"median {kind:>11}: {rps:>9,.0f} req/s  {per_cpu:>9,.0f} req per generator CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
