"""A run made after the advice of an earlier run was applied, against what that advice
predicted (`pinchpoint run PLAN --check-advice RUN`): the throughput measured at the load
the prediction was made for, and whether the setting it named changed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.analyze.usage import serving_processes
from pinchpoint.compare.advice_shapes import (
    LaterVerdict,
    Prediction,
    Step,
    earlier_verdict,
    later_verdict,
    shown,
)
from pinchpoint.compare.advice_shapes import prediction as checked_prediction
from pinchpoint.rundir import files
from pinchpoint.rundir.view import as_view


@dataclass(frozen=True)
class AdviceCheck:
    before_run: str
    prediction: Prediction
    measured_rps: float
    at_users: int
    # The setting as this run found it (a pool's size, a quota); None when not known.
    found: float | None

    @property
    def error(self) -> float:
        """Measured against predicted, as a share: -0.1 is 10% below the prediction."""
        predicted = self.prediction["predicted_rps"]
        share = self.measured_rps / predicted - 1 if predicted > 0 else 0.0
        # As for a prediction of 0: one of 1e-320 req/s would make the share infinite.
        return share if math.isfinite(share) else 0.0

    @property
    def applied(self) -> bool | None:
        if self.found is None:
            return None
        return abs(self.found - self.prediction["to"]) < 1e-6

    def as_json(self) -> dict:
        return {
            "before_run": self.before_run,
            "prediction": self.prediction,
            "measured_rps": round(self.measured_rps, 1),
            "at_users": self.at_users,
            "error": round(self.error, 3),
            "found": self.found,
            "applied": self.applied,
        }

    def lines(self) -> list[str]:
        """The check in words, its numbers those of `as_json` (rounded from them)."""
        p = self.prediction
        setting = str(p["setting"]).replace("_", " ")
        out = [
            f"Advice of {self.before_run}: {p['component']} {setting} {p['now']:g} → {p['to']:g}, "
            f"predicted about {p['predicted_rps']:.0f} req/s at {p['at_users']} users "
            f"(was {p['measured_rps']:.0f}); measured {round(self.measured_rps, 1):.0f} req/s at "
            f"{self.at_users} users ({100 * round(self.error, 3):+.0f}%)."
        ]
        if self.applied is False and self.found is not None:
            out.append(
                f"{p['component']} has {setting} {self.found:g} in this run, not {p['to']:g}: "
                "the prediction was for the advised setting."
            )
        return out


def read_prediction(run_dir: Path) -> Prediction:
    """The prediction of a run's verdict; ValueError naming the file (and the field) when
    it cannot be read, or the folder when its verdict predicts nothing."""
    view = as_view(run_dir)
    try:
        found = earlier_verdict(view.verdict).get("bottleneck")
    except ValueError as e:
        raise ValueError(f"{view.folder / files.VERDICT}: {e}") from None
    if found is None:
        raise ValueError(f"{run_dir}: its verdict names no bottleneck, so it gives no advice")
    predicted = found.get("prediction")
    if predicted is None:
        raise ValueError(
            f"{run_dir}: its verdict ({shown(found['component'])} {shown(found['resource'])}) "
            "predicts no change: only a pool's size, an app's connections and a CPU quota "
            "are predicted"
        )
    return predicted


def check_advice(before_run: str, prediction: Prediction, after: dict) -> AdviceCheck:
    """The run `after` (its verdict) against the prediction of `before_run`: throughput at
    the heaviest step up to the users the prediction was made for. ValueError naming the
    field of either that cannot be read."""
    prediction = checked_prediction(prediction)
    later = later_verdict(after)
    measured = [
        (s, rate) for s in later.get("steps") or [] if (rate := s.get("throughput_rps")) is not None
    ]
    if not measured:
        raise ValueError("the run measured no step")
    within = [(s, r) for s, r in measured if s["users"] <= prediction["at_users"]]
    step, rate = (within or measured[:1])[-1]
    return AdviceCheck(
        before_run=before_run,
        prediction=prediction,
        measured_rps=rate,
        at_users=step["users"],
        found=_setting(prediction, later, step),
    )


def _setting(prediction: Prediction, after: LaterVerdict, step: Step) -> float | None:
    component, setting = prediction["component"], prediction["setting"]
    if setting == "workers":
        pool = (after.get("pools") or {}).get(component)
        return float(pool["slots"]) if pool is not None and not pool.get("most") else None
    if setting == "connections":
        return None  # an app's pool: no log or command line tells its size
    resources = (step.get("resources") or {}).get(component) or {}
    if setting == "processes":
        processes = serving_processes(resources.get("processes"))
        return float(processes) if processes else None
    quota = resources.get("cpu_quota_cores")
    return round(quota, 2) if quota is not None else None


def check_run_advice(before_dir: Path, prediction: Prediction, after_dir: Path) -> AdviceCheck:
    """Checks the run in `after_dir` against `prediction` (of `before_dir`) and keeps the
    result in its folder (advice_check.json)."""
    view = as_view(after_dir)
    try:
        checked = check_advice(before_dir.name, prediction, view.verdict)
    except ValueError as e:
        raise ValueError(f"{view.folder / files.VERDICT}: {e}") from None
    view.folder.write_json(files.ADVICE_CHECK, checked.as_json())
    return checked
