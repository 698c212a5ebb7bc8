"""The SLA's outcome as verdict.json keeps it (`sla`): the plan's [sla] checked once, by the
analysis, and read back by the terminal, the report, `pinchpoint sla` and the Python API.

`sla` is null when the plan has no [sla] table; else `passed`, each objective's result
(`SlaResult.to_dict`) and, when the SLA could not be checked (no requests.parquet),
`problem` saying why. A verdict.json without the key was written before the SLA was kept
in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pinchpoint.analyze.sla import SlaResult, StepValue, broken

# What to do with a verdict.json that does not keep the SLA's outcome.
ANALYZE_AGAIN = "verdict.json does not hold the SLA's outcome: run `pinchpoint analyze` again"


@dataclass(frozen=True)
class SlaOutcome:
    """The results of every objective, or why there are none."""

    results: list[SlaResult] = field(default_factory=list)
    problem: str | None = None  # why the SLA was not checked

    @property
    def passed(self) -> bool:
        return self.problem is None and not broken(self.results)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passed": self.passed,
            "results": [r.to_dict() for r in self.results],
        }
        if self.problem is not None:
            out["problem"] = self.problem
        return out

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SlaOutcome:
        """The outcome `to_json` wrote. Raises ValueError when it is not that."""
        try:
            results = [result_from_json(r) for r in value["results"]]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"verdict.json: sla: not an SLA's outcome ({exc})") from None
        problem = value.get("problem")
        return cls(results, str(problem) if problem is not None else None)


def result_from_json(value: dict[str, Any]) -> SlaResult:
    """One objective's result as `SlaResult.to_dict` wrote it."""
    return SlaResult(
        key=str(value["key"]),
        objective=str(value["objective"]),
        limit=float(value["limit"]),
        unit=str(value["unit"]),
        value=_number(value["value"]),
        requests=int(value["requests"]),
        passed=bool(value["passed"]),
        steps=[
            StepValue(
                step=int(s["step"]),
                users=int(s["users"]),
                requests=int(s["requests"]),
                value=_number(s["value"]),
                passed=bool(s["passed"]),
            )
            for s in value["steps"]
        ],
    )


def _number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def kept(verdict: dict[str, Any]) -> bool:
    """Whether the verdict holds the SLA's outcome (null when the plan has none)."""
    return "sla" in verdict


def stored_sla(verdict: dict[str, Any]) -> SlaOutcome | None:
    """The outcome the analysis kept in the verdict; None when the plan has no [sla].
    Raises LookupError for a verdict written before the outcome was kept, ValueError for
    one whose `sla` is not an outcome."""
    if not kept(verdict):
        raise LookupError(ANALYZE_AGAIN)
    value = verdict["sla"]
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("verdict.json: sla: not an SLA's outcome")
    return SlaOutcome.from_json(value)


def percentile_limits(outcome: SlaOutcome | None) -> list[tuple[str, float]]:
    """Each latency percentile objective as (`p99`, limit in ms), in the plan's order."""
    if outcome is None:
        return []
    return [(r.key.removesuffix("_ms"), r.limit) for r in outcome.results if r.unit == "ms"]
