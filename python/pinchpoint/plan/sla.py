"""Service level objectives of a plan (its `[sla]` table), as the plan reads it;
`pinchpoint.analyze.sla` checks them against a run folder.

```toml
[sla]
p50_ms = 15         # any percentile: p90_ms, p99_ms, "p99.9_ms" (quoted: a bare dot splits a key)
p99_ms = 50
error_rate = 0.01   # at most 1% of requests failed (a transport error or HTTP >= 400):
                    # of the calls in a gRPC run, the sessions in a WebSocket run
# error_rate = { grpc_call = 0.01, grpc_message = 0.001 }  # or each kind apart
slow_ms = 20        # at most 0.1% of the responses slower than 20 ms
slow_share = 0.001
abort = ["p99_ms"]  # stop the run when these break (true: any of them), checked each second
abort_after = "10s" # ... once they have stayed broken this long (default 0: at once)
```

"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pinchpoint.plan.kinds import KINDS
from pinchpoint.plan.toml import Duration, FieldError, parse_toml
from pinchpoint.rundir import files

PERCENTILE_KEY = re.compile(r"^p(\d{1,2}(?:\.\d+)?)_ms$")
KEYS_HELP = (
    'pNN_ms (p50_ms, p99_ms, "p99.9_ms"), error_rate, slow_ms with slow_share, abort, abort_after'
)


class Sla(BaseModel):
    """The `[sla]` table: percentile thresholds in ms (`pNN_ms`, the extra keys), the
    highest share of failed requests, and the highest share of responses slower than
    `slow_ms`."""

    model_config = ConfigDict(extra="allow", frozen=True)
    __pydantic_extra__: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]]

    # The highest share of failed exchanges (requests, WebSocket sessions, gRPC calls:
    # plan/kinds.py), or of the records of each kind named.
    error_rate: float | dict[str, float] | None = None
    slow_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    slow_share: Annotated[float, Field(ge=0, le=1)] | None = None
    # The objectives that stop the run when they break (True: all), and for how long each
    # must have stayed broken first.
    abort: bool | list[str] = False
    abort_after: Annotated[Duration, Field(ge=0, le=86_400)] = 0.0

    @field_validator("error_rate", mode="before")
    @classmethod
    def _error_rates(cls, value: Any) -> Any:
        # Checked here, so that an error names the kind rather than both forms.
        if isinstance(value, dict):
            if not value:
                raise FieldError((), f"name at least one kind: {', '.join(KINDS)}")
            for kind, share in value.items():
                if kind not in KINDS:
                    raise FieldError(kind, f"unknown kind {kind!r}; the kinds: {', '.join(KINDS)}")
                _share(kind, share)
        elif value is not None:
            _share((), value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _dotted_percentile(cls, data: Any) -> Any:
        # `p99.9_ms = 5` unquoted is the TOML table p99 holding `9_ms`.
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, dict) and re.fullmatch(r"p\d{1,2}", str(key)):
                    inner = next(iter(value), "")
                    raise FieldError(
                        key, f'write "{key}.{inner}" in quotes: a bare dot splits a TOML key'
                    )
        return data

    @model_validator(mode="after")
    def _check_keys(self) -> Sla:
        # A FieldError names the key, so a plan error points at its line.
        for key in self.__pydantic_extra__ or {}:
            match = PERCENTILE_KEY.match(key)
            if not match:
                raise FieldError(key, f"unknown SLA key {key!r}; the keys are {KEYS_HELP}")
            if not 0 < float(match.group(1)) < 100:
                raise FieldError(key, "the percentile must be above 0 and below 100")
        self._check_abort()
        if (self.slow_ms is None) != (self.slow_share is None):
            raise FieldError(
                "slow_ms" if self.slow_share is None else "slow_share",
                "slow_ms and slow_share go together: the share of responses slower than "
                "slow_ms must stay at or below slow_share",
            )
        return self

    def _check_abort(self) -> None:
        if isinstance(self.abort, list):
            keys = self.objective_keys()
            for name in self.abort:
                if name not in keys:
                    said = ", ".join(keys) or "none"
                    raise FieldError(
                        "abort",
                        f"{name!r} is not an objective of this [sla]; its objectives: {said}",
                    )
        elif self.abort and not self.objective_keys():
            raise FieldError("abort", "abort = true needs an objective to watch")

    def objective_keys(self) -> list[str]:
        """The keys of the objectives set: the percentiles, error_rate, slow_ms."""
        keys = [key for key, _, _ in self.percentiles()]
        keys += [key for key, _, _ in self.error_rates()]
        keys += ["slow_ms"] if self.slow_ms is not None else []
        return keys

    def error_rates(self) -> list[tuple[str, str | None, float]]:
        """(key, kind, limit) of each error rate objective: `error_rate` with kind None
        (the run's exchanges), or `error_rate.<kind>` for each kind named."""
        if self.error_rate is None:
            return []
        if isinstance(self.error_rate, dict):
            return [(f"error_rate.{k}", k, float(v)) for k, v in self.error_rate.items()]
        return [("error_rate", None, float(self.error_rate))]

    def kinds_named(self) -> list[str]:
        """The kinds the error rates name, each once."""
        return [kind for _, kind, _ in self.error_rates() if kind is not None]

    def abort_keys(self) -> list[str]:
        """The objectives whose break stops the run."""
        if isinstance(self.abort, list):
            return list(self.abort)
        return self.objective_keys() if self.abort else []

    def percentiles(self) -> list[tuple[str, float, float]]:
        """(key, percentile, limit in ms) of each percentile threshold, lowest first."""
        found = []
        for key, limit in (self.__pydantic_extra__ or {}).items():
            match = PERCENTILE_KEY.match(key)
            if match:
                found.append((key, float(match.group(1)), float(limit)))
        return sorted(found, key=lambda item: item[1])

    def is_empty(self) -> bool:
        return not self.percentiles() and self.error_rate is None and self.slow_ms is None


def _share(loc: str | tuple[()], value: object) -> None:
    """FieldError at `loc` unless `value` is a number from 0 to 1."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= float(value) <= 1:  # type: ignore[arg-type]
        raise FieldError(loc, f"{value!r} is not a share from 0 to 1 (0.01: 1%)")


class _PlanSla(BaseModel):
    """A plan's text read for its [sla] table alone."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    sla: Sla | None = None


def sla_of_plan_text(text: str, source: str = files.PLAN) -> Sla | None:
    """The `[sla]` table of a plan's text alone (the rest of the plan is not checked),
    None when there is none. Raises ValueError naming the file, line and key."""
    return parse_toml(_PlanSla, text, source, ValueError).sla
