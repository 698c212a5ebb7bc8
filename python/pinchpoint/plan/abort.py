"""The `[[abort]]` tables of a plan: stop the run when a metric of its seconds passes a
limit, held for a while, judged only once the run has gone on for a while; watched each
second by `pinchpoint.load.abort_rules`.

```toml
[[abort]]
metric = "p99_ms"   # any of METRICS, or any percentile pNN_ms
above = 500         # or below = ...: the limit, one of them
for_s = 5           # for this long (default 0: the first second past the limit)
after_s = 10        # judged from this many seconds of the run on (default 0)
```
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, model_validator

from pinchpoint.plan.toml import Duration, FieldError, Strict

# Each metric the run computes for each of its seconds, and what it is.
METRICS = {
    "rps": "requests ended in the second, per second",
    "error_rate": "the share of the second's requests that failed (0 to 1)",
    "http_4xx_rate": "the share of the second's requests answered 4xx",
    "http_5xx_rate": "the share of the second's requests answered 5xx",
    "mean_ms": "the mean latency of the second's responses",
    "max_ms": "the longest latency of the second's responses",
    "users": "the users of the current step",
    "in_flight": "the requests sent and not yet answered",
    "send_lag_ms": "the longest a request of the second was sent after its time (open loop)",
}
PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?)_ms$")
MAX_RULES = 32


def metric_names() -> str:
    return ", ".join([*METRICS, "pNN_ms (p50_ms, p99_ms, p99.9_ms)"])


class AbortRule(Strict):
    """One `[[abort]]` table."""

    metric: str
    above: Annotated[float, Field(allow_inf_nan=False)] | None = None
    below: Annotated[float, Field(allow_inf_nan=False)] | None = None
    for_s: Annotated[Duration, Field(ge=0, le=86_400)] = 0.0
    after_s: Annotated[Duration, Field(ge=0, le=86_400)] = 0.0

    @model_validator(mode="after")
    def _check(self) -> AbortRule:
        if self.metric not in METRICS:
            match = PERCENTILE.match(self.metric)
            if match is None:
                raise FieldError(
                    "metric", f"unknown metric {self.metric!r}; the metrics: {metric_names()}"
                )
            if not 0 < float(match.group(1)) < 100:
                raise FieldError("metric", "the percentile must be above 0 and below 100")
        if (self.above is None) == (self.below is None):
            raise FieldError("above", "give one limit: above = N, or below = N")
        return self

    @property
    def limit(self) -> float:
        return self.above if self.above is not None else float(self.below or 0.0)

    def passes(self, value: float) -> bool:
        """Whether `value` is past the limit (strictly)."""
        return value > self.limit if self.above is not None else value < self.limit

    def percentile(self) -> float | None:
        """The percentile a pNN_ms metric names, None for the others."""
        match = PERCENTILE.match(self.metric)
        return float(match.group(1)) if match else None


AbortRules = Annotated[list[AbortRule], Field(max_length=MAX_RULES)]
