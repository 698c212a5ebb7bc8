"""How close the verdict's predictions come: the advice applied, then measured.

Draws the matrix's scenarios of the classes whose advice changes a number (a pool of
waiting workers, a pool of computing workers, a CPU quota), runs each as drawn, reads the
prediction of its verdict (`bottleneck.prediction`: the setting, its new value and the
throughput at the heaviest step), starts the same stack again with the advised setting,
runs the same plan and measures the throughput at that step, as
`pinchpoint run PLAN --check-advice RUN` does.

    .venv/bin/python bench/advice_accuracy.py --count 9 --seed 401

Needs root (cgroups), nginx, HAProxy, uWSGI, as `make test` installs them.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path

from pinchpoint.compare.advice import AdviceCheck, check_advice
from pinchpoint_lab.matrix.draws import draw
from pinchpoint_lab.matrix.run import run_one
from pinchpoint_lab.matrix.spec import Spec

CLASSES = ("pool_wait", "pool_cpu", "cpu_quota")


def advised(spec: Spec, prediction: dict) -> Spec | None:
    """The scenario with the prediction's setting applied to its stack; None when the
    matrix cannot set it (a quota on the database)."""
    setting, to = prediction["setting"], prediction["to"]
    if setting == "processes":
        return replace(spec, workers=int(to))
    if setting == "workers":
        if spec.threads > 1:
            return replace(spec, threads=math.ceil(int(to) / spec.workers))
        return replace(spec, workers=int(to))
    if setting == "cpu_quota_cores" and spec.quota_on == "server":
        return replace(spec, quota=float(to))
    return None


def _run(spec: Spec, step_s: float) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="pinchpoint-advice-"))
    try:
        return run_one(spec, workdir, step_s=step_s)[1]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def check_one(spec: Spec, step_s: float) -> AdviceCheck | str:
    before = _run(spec, step_s)
    found = before.get("bottleneck") or {}
    prediction = found.get("prediction")
    if prediction is None:
        return f"no prediction ({found.get('component')} {found.get('resource')})"
    after_spec = advised(spec, prediction)
    if after_spec is None:
        return f"cannot apply {prediction['setting']}"
    return check_advice(spec.name, prediction, _run(after_spec, step_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=9)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--step-seconds", type=float, default=2.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    specs = [s for s in draw(args.seed, 15 * args.count) if s.cls in CLASSES][: args.count]
    errors, rows = [], []
    for spec in specs:
        checked = check_one(spec, args.step_seconds)
        if isinstance(checked, str):
            print(f"--  {spec.name:<44} {checked}", flush=True)
            rows.append({"scenario": spec.name, "skipped": checked})
            continue
        p = checked.prediction
        errors.append(checked.error)
        print(
            f"{'ok ' if abs(checked.error) <= 0.25 else 'off'} {spec.name:<44} "
            f"{p['setting']} {p['now']:g}→{p['to']:g} was {p['measured_rps']:.0f} "
            f"predicted {p['predicted_rps']:.0f} ({p['limited_by']}) measured "
            f"{checked.measured_rps:.0f} req/s at {checked.at_users} users "
            f"({100 * checked.error:+.0f}%)",
            flush=True,
        )
        rows.append({"scenario": spec.name, **checked.as_json()})
    if errors:
        absolute = [abs(e) for e in errors]
        print(
            f"\n{len(errors)} predictions checked: median error {100 * statistics.median(absolute):.0f}%, "
            f"within 15%: {sum(a <= 0.15 for a in absolute)}, within 25%: "
            f"{sum(a <= 0.25 for a in absolute)}, median signed {100 * statistics.median(errors):+.0f}%"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
