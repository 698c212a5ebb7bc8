"""A plan's service level objectives checked against a run folder: over the whole run
(every step's steady part, the requests the verdict's table covers) and at each step on
its own. A threshold broken at any step is broken, and the result names the steps.
Percentiles and the slow share are of the successful responses (no error, HTTP status
below 400), as in the verdict and in `pinchpoint compare --sla-ms`; failures count in
`error_rate`: the share of the run's exchanges that failed (its requests, WebSocket
sessions and gRPC calls: plan/kinds.py), or of each kind's records, the kind of each
record's `endpoint` as run.json's `endpoint_kinds` gives it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from pinchpoint.plan.kinds import EXCHANGES
from pinchpoint.plan.sla import Sla
from pinchpoint.rundir import files
from pinchpoint.rundir.view import RunView, as_view

if TYPE_CHECKING:
    import polars as pl

    from pinchpoint.rundir.digest import Digest
    from pinchpoint.rundir.scan import Frame


@dataclass(frozen=True)
class StepValue:
    """One threshold's value at one step."""

    step: int
    users: int
    requests: int  # the requests the value comes from (successful ones for latencies)
    value: float | None  # None: nothing to measure (no successful response)
    passed: bool


@dataclass(frozen=True)
class SlaResult:
    key: str  # "p99_ms", "error_rate", "error_rate.<kind>" or "slow_share"
    objective: str  # "p99 ≤ 50 ms"
    limit: float
    unit: str  # "ms" or "share"
    value: float | None  # over all steps
    requests: int
    passed: bool
    steps: list[StepValue] = field(default_factory=list)

    @property
    def broken_steps(self) -> list[StepValue]:
        return [s for s in self.steps if not s.passed]

    def describe(self, value: float | None) -> str:
        if value is None:
            return "no successful response" if self.unit == "ms" else "no requests"
        if self.unit == "ms":
            return f"{_ms(value)} ms"
        return _share(value)

    def message(self) -> str:
        """One line: the objective, the value over the run, and where it broke."""
        verdict = "met" if self.passed else "BROKEN"
        text = f"{self.objective}: {verdict} — {self.describe(self.value)} over the run"
        broken = self.broken_steps
        if broken:
            where = ", ".join(f"{users_text(s.users)} ({self.describe(s.value)})" for s in broken)
            text += f"; broken at {where}"
        return text

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["broken_at_users"] = [s.users for s in self.broken_steps]
        out["message"] = self.message()
        return out


def check_sla(
    plan_sla: Sla | dict[str, Any] | None, run: RunView | files.RunFolder | PathLike[str]
) -> list[SlaResult]:
    """Every threshold of `plan_sla` checked on the run folder's requests: over all steps
    and at each step. Raises FileNotFoundError without requests.parquet. The analysis
    keeps the plan's own [sla] checked in verdict.json (`sla_record`): this is for
    other thresholds (`pinchpoint sla --plan`, the API's `check_sla(sla)`)."""
    if plan_sla is None:
        return []
    sla = plan_sla if isinstance(plan_sla, Sla) else Sla.model_validate(plan_sla)
    view = as_view(run)
    columns = ["step", "users", "start_us", "latency_us", "status", "error"]
    # Open loop: the steady part is cut by the intended send time; the kinds by endpoint.
    requests = view.scan_requests(columns, ["intended_us", "endpoint"])
    return evaluate(sla, requests, view.run if view.has(files.RUN) else {})


def over_ms(sla: Sla) -> list[float]:
    """The latencies (ms) a digest must count the responses above for `evaluate`."""
    return [sla.slow_ms] if sla.slow_ms is not None and sla.slow_share is not None else []


def evaluate(sla: Sla, requests: Frame | Digest, run: dict[str, Any]) -> list[SlaResult]:
    """The thresholds checked on `requests` (the columns of requests.parquet, read whole or
    scanned), cut to each step's steady part by run.json's step windows and warm-up; or on
    their digest, cut by those windows and counting the latencies over `slow_ms`."""
    import polars as pl

    from pinchpoint.rundir.digest import Digest, over_column
    from pinchpoint.rundir.steady import usable_windows

    windows = usable_windows(run)
    slow_ms = sla.slow_ms if sla.slow_share is not None else None
    if isinstance(requests, Digest):
        digest = requests
        if slow_ms is not None and not digest.rows.is_empty():
            assert over_column(slow_ms) in digest.rows.columns, "a digest without over_ms(sla)"
    else:
        digest = Digest.of(requests, windows, over_ms=over_ms(sla), extent=not windows)
    steady = digest.where(pl.col("window").is_not_null()) if windows else digest
    whole = _Part(step=-1, users=0, digest=steady)
    users = {w.step: w.users for w in reversed(windows)}
    parts = [
        _Part(step=int(step), users=int(users.get(step, part.first("users") or 0)), digest=part)
        for step, part in steady.groups("step")
    ]

    results = []
    for key, q, limit in sla.percentiles():

        def percentile(ok: Digest, part: Digest, q: float = q) -> float | None:
            value = ok.percentiles_us([q])[0]
            return value / 1000 if value is not None else None

        objective = f"p{q:g} ≤ {limit:g} ms"
        results.append(_result(key, objective, limit, "ms", whole, parts, percentile))
    kinds = run.get("endpoint_kinds")
    for key, kind, limit in sla.error_rates():
        wanted = _kind_records(kinds, kind)
        mine = steady if wanted is None else steady.where(wanted)
        whole_kind = _Part(step=-1, users=0, digest=mine)
        kind_parts = [
            _Part(step=p.step, users=p.users, digest=p.digest.where(wanted)) for p in parts
        ] if wanted is not None else parts  # fmt: skip

        def error_rate(ok: Digest, part: Digest) -> float | None:
            count = part.count()
            return (count - ok.count()) / count if count else None

        objective = f"errors ≤ {_share(limit)} of {_records_named(kinds, kind)}"
        results.append(_result(key, objective, limit, "share", whole_kind, kind_parts, error_rate))
    if slow_ms is not None and sla.slow_share is not None:

        def slow_share(ok: Digest, part: Digest) -> float | None:
            count = ok.count()
            return ok.total(over_column(slow_ms)) / count if count else None

        objective = f"responses slower than {slow_ms:g} ms ≤ {_share(sla.slow_share)}"
        results.append(
            _result("slow_share", objective, sla.slow_share, "share", whole, parts, slow_share)
        )
    return results


# What a kind's records are called in an objective.
_NOUNS = {
    "request": "requests",
    "ws_session": "WebSocket sessions",
    "ws_message": "WebSocket messages",
    "grpc_call": "gRPC calls",
    "grpc_message": "gRPC stream messages",
}


def _kind_records(kinds: list[str] | None, kind: str | None) -> pl.Expr | None:
    """The records of `kind` (None: the exchanges) by their `endpoint` and the run's
    `kinds` of each endpoint (past the list: requests); None for every record (every
    record is of those kinds, or the run folder does not say its kinds: then every
    record counts as an exchange).
    Raises ValueError for a kind named on such a folder."""
    import polars as pl

    if kinds is None:
        if kind is None:
            return None
        raise ValueError(
            f"error_rate.{kind}: run.json does not say each record's kind "
            "(the run is older than the kinds): judge it with a bare error_rate"
        )
    wanted = EXCHANGES if kind is None else (kind,)
    if all(k in wanted for k in kinds):
        return None
    mine = [at for at, k in enumerate(kinds) if k in wanted]
    found = pl.col("endpoint").is_in(mine)
    return found | (pl.col("endpoint") >= len(kinds)) if "request" in wanted else found


def _records_named(kinds: list[str] | None, kind: str | None) -> str:
    """The records an error rate is of: the kind's, or the exchanges the run sent."""
    if kind is not None:
        return _NOUNS[kind]
    sent = [k for k in EXCHANGES if k in (kinds or [])] or ["request"]
    return ", ".join(_NOUNS[k] for k in sent)


@dataclass(frozen=True)
class _Part:
    step: int
    users: int
    digest: Digest


def _result(
    key: str,
    objective: str,
    limit: float,
    unit: str,
    whole: _Part,
    parts: list[_Part],
    measure: Callable[[Digest, Digest], float | None],
) -> SlaResult:
    from pinchpoint.rundir.digest import FAILED

    def judge(part: _Part) -> tuple[float | None, int, bool]:
        """The value, the requests it comes from, and whether it meets the limit. A step
        that sent nothing is not judged; one whose every request failed has no latency to
        meet a latency objective with, which breaks it."""
        # A request with neither an error nor a status is no failure here.
        ok = part.digest.where(~FAILED.fill_null(False))
        value = measure(ok, part.digest)
        count = part.digest.count() if key.startswith("error_rate") else ok.count()
        if value is None:
            return None, count, part.digest.count() == 0 and part is not whole
        return value, count, value <= limit

    value, count, whole_passed = judge(whole)
    steps = []
    for part in parts:
        v, n, ok = judge(part)
        steps.append(StepValue(step=part.step, users=part.users, requests=n, value=v, passed=ok))
    return SlaResult(
        key=key,
        objective=objective,
        limit=limit,
        unit=unit,
        value=value,
        requests=count,
        passed=whole_passed and all(s.passed for s in steps),
        steps=steps,
    )


def _ms(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return f"{value:.2g}"


def users_text(n: int) -> str:
    return f"{n} user" if n == 1 else f"{n} users"


def _share(value: float) -> str:
    p = value * 100
    if p == 0:
        return "0%"
    if math.isclose(p, round(p)) and p >= 1:
        return f"{round(p)}%"
    return f"{p:.3g}%"


def broken(results: list[SlaResult]) -> bool:
    return any(not r.passed for r in results)


def worst_step(result: SlaResult) -> StepValue | None:
    """The broken step furthest over its limit, else the step closest to it."""
    broken_steps = result.broken_steps
    if broken_steps:
        return max(broken_steps, key=lambda s: -math.inf if s.value is None else s.value)
    measured = [s for s in result.steps if s.value is not None]
    return max(measured, key=lambda s: s.value or 0.0) if measured else None
