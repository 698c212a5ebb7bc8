"""A flow's throughput per generator CPU-second beside a single request's, and the cost
of a Python hook, side by side in one run.

nginx (one worker, small static answers) is pinned to one core; the engine to the
other, with the same users and duration for each load, interleaved over several rounds:
- single: one GET, as `pinchpoint load` sends it;
- flow: login (POST, a JSONPath capture of the token, a status check), a list (a
  JSONPath capture of an id, the token in a header), a detail (the id in the path, a
  JSON check that it is the id asked for), with the cookie jar on;
- hook: the same flow with a Python hook signing the detail request (HMAC-SHA256 of
  the method, path and body into a header);
- compare: the same flow, the detail checked by two numeric comparisons with the
  captured id through arithmetic (`equals = "${order}"`, `le = "${order} * 1.1"` on
  its quantity) instead of one JSON text check.
Printed per round and as medians: requests/s, requests per generator CPU-second, and
the flow's and the hook's ratios to the single request, and compare's to the flow.

    .venv/bin/python bench/flow_throughput.py --users 50 --seconds 10 --rounds 3
    .venv/bin/python bench/flow_throughput.py --kinds single,flow,compare
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine_vs_wrk import start_nginx

from pinchpoint.load.engine import run_steps
from pinchpoint.plan.model import parse_plan

LOCATIONS = """\
    default_type application/json;
    location = /plain { return 200 "ok"; }
    location = /login {
      add_header Set-Cookie "session=s1; Path=/";
      return 200 '{"token": "t0k3n", "user": "u1"}';
    }
    location = /orders { return 200 '{"orders": [{"id": 17, "qty": 1}, {"id": 18, "qty": 2}]}'; }
    location = /orders/17 { return 200 '{"id": 17, "qty": 1}'; }
"""

HOOK = """\
import hashlib
import hmac

KEY = b"bench-key"


def sign(request, vars):
    text = request["method"].encode() + request["path"].encode() + request["body"]
    digest = hmac.new(KEY, text, hashlib.sha256).hexdigest()
    request["headers"].append(("X-Signature", digest))
"""

FLOW = """
[[flow]]
name = "shop"

[[flow.step]]
name = "login"
method = "POST"
path = "/login"
body = '{{"user": "u${{user_index}}"}}'
capture = [{{ name = "token", json = "$.token" }}]
check = {{ status = 200 }}

[[flow.step]]
name = "orders"
path = "/orders"
headers = {{ Authorization = "Bearer ${{token}}" }}
capture = [{{ name = "order", json = "$.orders[0].id" }}]

[[flow.step]]
name = "detail"
path = "/orders/${{order}}"
headers = {{ Authorization = "Bearer ${{token}}" }}
check = {{ json = {check} }}
hook = {hook}
"""


TEXT_CHECK = '{ "$.id" = "${order}" }'
COMPARE_CHECK = '{ "$.id" = { equals = "${order}" }, "$.qty" = { le = "${order} * 1.1" } }'
KINDS = ("single", "flow", "hook", "compare")


def plan_text(url: str, users: int, seconds: float, kind: str, hook_file: Path) -> str:
    load = f'users = {users}\nduration = "{seconds:g}s"\nthreads = 1\ntimeout = "5s"'
    if kind == "hook":
        load += f'\nhook = "{hook_file}:sign"'
    head = f'[target]\nurl = "{url}"\n\n[load]\n{load}\n'
    if kind == "single":
        return head + '\n[[request]]\npath = "/plain"\n'
    check = COMPARE_CHECK if kind == "compare" else TEXT_CHECK
    return head + FLOW.format(hook="true" if kind == "hook" else "false", check=check)


def run_one(text: str, workdir: Path, core: int) -> dict:
    plan = parse_plan(text, "bench.toml")
    run_dir = Path(tempfile.mkdtemp(dir=workdir))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        cpu0, wall0 = time.process_time(), time.monotonic()
        result = run_steps(plan, run_dir.name, run_dir)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
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


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="of " + ", ".join(KINDS))
    args = ap.parse_args()
    kinds = tuple(args.kinds.split(","))
    if "single" not in kinds or not set(kinds) <= set(KINDS):
        print(f"--kinds: single and any of {', '.join(KINDS)}", file=sys.stderr)
        return 2
    if (os.cpu_count() or 1) < 2:
        print("needs two cores: one for nginx, one for the generator", file=sys.stderr)
        return 2
    results: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="pinchpoint-flow-bench-") as tmp:
        workdir = Path(tmp)
        hook_file = workdir / "sign_hook.py"
        hook_file.write_text(HOOK)
        nginx, port = start_nginx(workdir, core=0, locations=LOCATIONS)
        url = f"http://127.0.0.1:{port}"
        try:
            for r in range(args.rounds):
                for kind in kinds:
                    text = plan_text(url, args.users, args.seconds, kind, hook_file)
                    got = run_one(text, workdir, core=1)
                    if got["errors"]:
                        print(f"{kind}: {got['errors']} of {got['requests']} requests failed")
                        return 1
                    results[kind].append(got)
                    print(
                        f"round {r + 1} {kind:>6}: {got['rps']:>9,.0f} req/s  "
                        f"{got['per_cpu_s']:>9,.0f} req per generator CPU-s  "
                        f"generator {got['gen_cores']:.2f} cores",
                        flush=True,
                    )
        finally:
            nginx.terminate()
            nginx.wait(timeout=10)
    med = {k: {m: statistics.median(x[m] for x in rs) for m in rs[0]} for k, rs in results.items()}
    print()
    for kind, m in med.items():
        print(f"median {kind:>6}: {m['rps']:>9,.0f} req/s  {m['per_cpu_s']:>9,.0f} req per CPU-s")
    single = med["single"]["per_cpu_s"]
    print()
    for kind in kinds[1:]:
        ratio = med[kind]["per_cpu_s"] / single
        print(f"ratio {kind}/single: {ratio:.2f}x req per generator CPU-s")
    if "compare" in med and "flow" in med:
        ratio = med["compare"]["per_cpu_s"] / med["flow"]["per_cpu_s"]
        print(f"ratio compare/flow: {ratio:.3f}x req per generator CPU-s")
    if "hook" not in med or "flow" not in med:
        return 0
    # One request in three goes through the hook: its cost per hooked request.
    per_flow_req = 1 / med["flow"]["per_cpu_s"]
    per_hook_req = 1 / med["hook"]["per_cpu_s"]
    hook_us = (per_hook_req - per_flow_req) * 3 * 1e6
    print(f"hook cost: {hook_us:.1f} us of generator CPU per hooked request")
    print(
        f"one core with a hook on every request: about {1e6 / (per_flow_req * 1e6 + hook_us):,.0f} req/s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
