"""The verdict's accuracy on seeded scenarios of real stacks, each with a known limit.

Draws N scenarios from a seed (python/pinchpoint_lab/matrix/draws.py: the classes in turn,
each one's truth from a capacity model), starts each stack for real, steps its users with
short steps, and judges the verdict: resource right, component right, both, and the start
within one step of the truth; then the same with a CPU hog of 1, 1.5 or 1.8 cores
spinning beside the stack (`--neighbour`), where the neighbour must also be reported as a
finding of its own. Where a heavy hog may leave the host too busy for any verdict, a
verdict that refuses to name a limit is counted apart ("refused"), not as wrong. As users
write plans, most plans do not say how many workers the app server has (`workers=none`
in a scenario's line), and the server reads its pool from flags or a config file
(`config=flags|file`).
`--find-knee` also runs each scenario with the knee search and counts the verdicts that
agree with the full plan's.

    .venv/bin/python bench/diagnosis_matrix.py --count 48 --seed 7 --neighbour both

Needs root (cgroups), nginx, HAProxy, uWSGI and PostgreSQL, as `make test` installs them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pinchpoint_lab.consistency import contradictions
from pinchpoint_lab.matrix.draws import draw
from pinchpoint_lab.matrix.run import run_one
from pinchpoint_lab.matrix.score import Outcome, accuracy_table, confusion, label
from pinchpoint_lab.matrix.spec import Spec


def _pool_found(spec: Spec, verdict: dict) -> tuple[str, int, int] | None:
    """How the verdict found the app server's pool, its size and the true one, where the
    server has a pool of slots (not an event loop) and the verdict sized it."""
    found = (verdict.get("pools") or {}).get(spec.server_name)
    if found is None or spec.server.endswith("uvicorn"):
        return None
    return str(found["found"]), int(found["slots"]), spec.slots


def _line(o: Outcome, spec: Spec, seconds: float) -> str:
    mark = "ok " if o.right else "REF" if o.refused else "BAD"
    neighbour = f" neighbour={'yes' if o.neighbour_reported else 'no'}"
    neighbour += "" if o.neighbour_ok else " (WRONG)"
    mode = f"noisy hog={spec.hog_cores:g}" if o.noisy else "quiet"
    given = f"workers={'plan' if spec.plan_workers else 'none'} config={spec.server_config}"
    request = f" request={o.request}" if o.truth.request is not None else ""
    return (
        f"{mark} {o.name:<46} {mode} {given} truth={label(o.truth.component, o.truth.resource)}"
        f"@{o.truth.starts_at_users} got={label(o.component, o.resource)}@{o.starts_at_users}"
        f"{request} start={'ok' if o.start_ok(spec.levels()) else 'off'}{neighbour}"
        f" ({seconds:.0f} s)"
    )


def _pct(share: float | None, width: int) -> str:
    return f"{'—':>{width}} " if share is None else f"{100 * share:>{width}.0f}%"


def _print_tables(title: str, outcomes: list[tuple[Outcome, list[int]]]) -> None:
    print(f"\n{title}")
    print("(resource, component, both and start over the scenarios not refused)")
    print(
        f"{'class':<20}{'n':>4}{'refused':>9}{'resource':>10}{'component':>11}{'both':>8}"
        f"{'start':>8}"
    )
    for row in accuracy_table(outcomes):
        print(
            f"{row['class']:<20}{row['n']:>4}{row['refused']:>9}{_pct(row['resource'], 9)}"
            f"{_pct(row['component'], 10)}{_pct(row['right'], 7)}{_pct(row['start'], 7)}"
        )
    healthy = [o for o, _ in outcomes if o.truth.resource is None]
    if healthy:
        false = sum(o.false_bottleneck for o in healthy)
        print(f"false bottlenecks on healthy scenarios: {false} of {len(healthy)}")
    wrong = sum(not o.neighbour_ok for o, _ in outcomes)
    print(
        f"neighbour finding wrong (missed with one, or reported without): {wrong} of {len(outcomes)}"
    )
    print("confusion (true resource → named resource: count)")
    for (truth, named), n in sorted(confusion([o for o, _ in outcomes]).items()):
        print(f"  {truth:>12} → {named:<12} {n}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=48, help="scenarios to draw (default 48)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", nargs="*", default=None, help="run only these classes")
    parser.add_argument("--step-seconds", type=float, default=2.0)
    parser.add_argument("--neighbour", choices=("no", "yes", "both"), default="both")
    parser.add_argument("--find-knee", action="store_true")
    parser.add_argument(
        "--discover",
        action="store_true",
        help="plan each stack's components with `pinchpoint init` from its URL",
    )
    parser.add_argument("--json", type=Path, default=None, help="write every outcome here")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    args = parser.parse_args()

    specs = [s for s in draw(args.seed, args.count) if not args.only or s.cls in args.only]
    modes = {"no": [False], "yes": [True], "both": [False, True]}[args.neighbour]
    results: dict[bool, list[tuple[Outcome, list[int]]]] = {m: [] for m in modes}
    agree: list[bool] = []
    contradicted: list[bool] = []
    pools: list[tuple[str, int, int]] = []
    records = []
    for noisy in modes:
        for spec in specs:
            if noisy and spec.starved:
                continue  # a starved generator is its own neighbour already
            workdir = Path(tempfile.mkdtemp(prefix="pinchpoint-matrix-"))
            began = time.monotonic()
            try:
                outcome, verdict = run_one(
                    spec, workdir, noisy=noisy, step_s=args.step_seconds, discover=args.discover
                )
                pool = _pool_found(spec, verdict)
                if pool is not None:
                    pools.append(pool)
                    print(f"    pool {pool[0]}: {pool[1]} found, {pool[2]} true", flush=True)
                denied = contradictions(verdict)
                contradicted.append(bool(denied))
                for problem in denied:
                    print(f"    CONTRADICTION {problem}", flush=True)
                if args.find_knee and not noisy:
                    searched, _ = run_one(
                        spec, workdir / "knee", step_s=args.step_seconds, find_knee=True
                    )
                    same = (searched.component, searched.resource) == (
                        outcome.component,
                        outcome.resource,
                    )
                    agree.append(same)
                    if not same:
                        print(f"    --find-knee: {searched.headline}", flush=True)
            except Exception as e:  # a stack that failed to start is reported, not hidden
                print(f"ERR {spec.name}: {type(e).__name__}: {e}", flush=True)
                continue
            finally:
                if args.keep is not None and (workdir / "runs").exists():
                    shutil.copytree(
                        workdir / "runs",
                        args.keep / spec.name / ("noisy" if noisy else "quiet"),
                        dirs_exist_ok=True,
                    )
                shutil.rmtree(workdir, ignore_errors=True)
            print(_line(outcome, spec, time.monotonic() - began), flush=True)
            if not outcome.right:
                print(f"    {outcome.headline}", flush=True)
            results[noisy].append((outcome, spec.levels()))
            records.append(
                {
                    "spec": spec.as_dict(),
                    "noisy": noisy,
                    "verdict": {
                        "component": outcome.component,
                        "resource": outcome.resource,
                        "request": outcome.request,
                        "refused": outcome.refused,
                        "starts_at_users": outcome.starts_at_users,
                        "headline": outcome.headline,
                    },
                }
            )
    for noisy in modes:
        if results[noisy]:
            _print_tables("with a CPU hog beside the stack" if noisy else "quiet", results[noisy])
    for how in ("server", "inferred", "plan"):
        mine = [(f, t) for h, f, t in pools if h == how]
        if mine:
            near = sum(abs(f - t) <= 1 for f, t in mine)
            print(f"pool sizes found from the {how}: {near} of {len(mine)} within one of the truth")
    print(
        f"\nverdicts contradicted by their own evidence: {sum(contradicted)} of {len(contradicted)}"
    )
    if agree:
        print(f"\n--find-knee agrees with the full plan: {sum(agree)} of {len(agree)}")
    if args.json is not None:
        args.json.write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
