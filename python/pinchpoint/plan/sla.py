"""Service level objectives of a plan (its `[sla]` table), as the plan reads it;
`pinchpoint.analyze.sla` checks them against a run folder.

```toml
[sla]
p50_ms = 15         # any percentile: p90_ms, p99_ms, "p99.9_ms" (quoted: a bare dot splits a key)
p99_ms = 50
error_rate = 0.01   # at most 1% of requests failed (a transport error or HTTP >= 400)
slow_ms = 20        # at most 0.1% of the responses slower than 20 ms
slow_share = 0.001
abort = ["p99_ms"]  # stop the run when these break (true: any of them), checked each second
abort_after = "10s" # ... once they have stayed broken this long (default 0: at once)
```

"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

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

    error_rate: Annotated[float, Field(ge=0, le=1)] | None = None
    slow_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    slow_share: Annotated[float, Field(ge=0, le=1)] | None = None
    # The objectives that stop the run when they break (True: all), and for how long each
    # must have stayed broken first.
    abort: bool | list[str] = False
    abort_after: Annotated[Duration, Field(ge=0, le=86_400)] = 0.0

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
        keys += [k for k in ("error_rate", "slow_ms") if getattr(self, k) is not None]
        return keys

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


class _PlanSla(BaseModel):
    """A plan's text read for its [sla] table alone."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    sla: Sla | None = None


def sla_of_plan_text(text: str, source: str = files.PLAN) -> Sla | None:
    """The `[sla]` table of a plan's text alone (the rest of the plan is not checked),
    None when there is none. Raises ValueError naming the file, line and key."""
    return parse_toml(_PlanSla, text, source, ValueError).sla
