"""The `[sla]` objectives that stop a run (`abort`), watched each second while it goes.

Each second the engine's live counters give that second's requests, errors and latency
histogram (its snapshot); an objective is judged on that second alone. An error rate is
of the second's exchanges (requests, WebSocket sessions, gRPC calls: plan/kinds.py) or
of the records of the kind it names, from the snapshot's counts by kind (`by_kind`); a
snapshot without them (a Locust run's) has requests only. One that stays broken for
`abort_after` (0: the first broken second) stops the run, as a first Ctrl-C does: no new
request is sent, those in flight are waited for, and everything measured is kept. A
second with no response leaves every objective as it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pinchpoint.plan.kinds import EXCHANGES
from pinchpoint.plan.sla import Sla

if TYPE_CHECKING:
    from pinchpoint.load.hdr import Histogram

# The live percentiles a snapshot carries when it has no histogram of its window.
_WITHOUT_HISTOGRAM = {50.0: "window_p50_us", 99.0: "window_p99_us"}


@dataclass
class Abort:
    """Why a run was stopped: the objective, its limit, the value that broke it, where."""

    objective: str
    limit: float
    value: float
    step: int
    level: float
    kind: str
    broken_s: float

    def reason(self) -> str:
        unit = "" if self.objective.startswith("error_rate") else " ms"
        if self.objective == "slow_ms":
            what = f"the share slower than {self.limit:g} ms was {self.value:.3g}"
        else:
            what = f"{self.objective.removesuffix('_ms')} was {self.value:.4g}{unit}"
            what += f" (objective {self.limit:g}{unit})"
        load = f"{self.level:g} req/s" if self.kind == "rate" else f"{self.level:g} users"
        held = f" for {self.broken_s:.0f} s" if self.broken_s >= 1 else ""
        return f"[sla] {self.objective} broke{held} in step {self.step} ({load}): {what}"

    def as_json(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "limit": self.limit,
            "value": round(self.value, 6),
            "step": self.step,
            "broken_s": round(self.broken_s, 3),
            "reason": self.reason(),
        }


@dataclass
class AbortWatch:
    """Judges each second's snapshot against the aborting objectives of `sla`."""

    sla: Sla
    keys: list[str]
    since: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    # Records and errors so far of each kind, at the previous snapshot.
    last_kinds: dict[str, tuple[int, int]] = field(default_factory=dict)
    fired: Abort | None = None

    @classmethod
    def of(cls, sla: Sla | None) -> AbortWatch | None:
        """The watch of a plan's [sla], None when no objective aborts."""
        if sla is None or not sla.abort_keys():
            return None
        return cls(sla, sla.abort_keys())

    def observe(self, snapshot: dict[str, Any], now: float) -> Abort | None:
        """The abort, the first time an objective has stayed broken for abort_after."""
        if self.fired is not None:
            return None
        requests = snapshot.get("requests", 0)
        errors = snapshot.get("errors", 0)
        sent = requests - self.last.get("requests", 0)
        self.last = {"requests": requests, "errors": errors}
        kinds = self._kinds_since(snapshot, requests, errors)
        if sent <= 0 or not snapshot.get("window_requests"):
            return None
        window = _window(snapshot)
        for key in self.keys:
            value, limit = self._value(key, window, snapshot, kinds)
            if value is None or value <= limit:
                self.since.pop(key, None)
                continue
            start = self.since.setdefault(key, now)
            # A second judged broken counts as a whole second broken.
            held = now - start + 1.0
            if held >= self.sla.abort_after:
                self.fired = Abort(
                    key, limit, value, int(snapshot.get("step", 0)),
                    float(snapshot.get("level", 0.0)) or float(snapshot.get("users", 0)),
                    str(snapshot.get("kind", "users")), held,
                )  # fmt: skip
                return self.fired
        return None

    def _kinds_since(
        self, snapshot: dict[str, Any], requests: int, errors: int
    ) -> dict[str, tuple[int, int]]:
        """The records and errors of each kind in the second."""
        counts = snapshot.get("by_kind")
        now = (
            {str(k): (int(c["requests"]), int(c["errors"])) for k, c in counts.items()}
            if counts is not None
            else {"request": (int(requests), int(errors))}
        )
        before, self.last_kinds = self.last_kinds, now
        zero = (0, 0)
        return {
            k: (n - before.get(k, zero)[0], e - before.get(k, zero)[1]) for k, (n, e) in now.items()
        }

    def _value(
        self,
        key: str,
        window: Histogram | None,
        snapshot: dict[str, Any],
        kinds: dict[str, tuple[int, int]],
    ) -> tuple[float | None, float]:
        rates = {k: (kind, limit) for k, kind, limit in self.sla.error_rates()}
        if key in rates:
            kind, limit = rates[key]
            wanted = EXCHANGES if kind is None else (kind,)
            sent = sum(n for k, (n, _) in kinds.items() if k in wanted)
            failed = sum(e for k, (_, e) in kinds.items() if k in wanted)
            return (failed / sent if sent > 0 else None), limit
        if key == "slow_ms":
            limit_ms = float(self.sla.slow_ms or 0.0)
            share = _share_above(window, limit_ms * 1000) if window is not None else None
            return share, float(self.sla.slow_share or 0.0)
        percentile, limit = next((p, lim) for k, p, lim in self.sla.percentiles() if k == key)
        if window is not None:
            return window.value_at_quantile(percentile / 100) / 1000, limit
        live = _WITHOUT_HISTOGRAM.get(percentile)
        if live is None or live not in snapshot:
            return None, limit
        return snapshot[live] / 1000, limit


def _window(snapshot: dict[str, Any]) -> Histogram | None:
    """The histogram of the snapshot's second, when it carries one."""
    data = snapshot.get("window_hdr_v2")
    if not data:
        return None
    # numpy, with the histograms, once the run has started rather than before it.
    from pinchpoint.load.hdr import Histogram, decode_v2

    counts = decode_v2(bytes(data))
    total = int(counts.sum())
    return Histogram(counts, total, 0, 0) if total else None


def _share_above(window: Histogram, limit_us: float) -> float:
    """The share of the window's responses slower than limit_us."""
    import numpy as np

    from pinchpoint.load.hdr import index_for

    first = int(index_for(np.array([math.floor(limit_us)], dtype=np.int64))[0]) + 1
    above = int(window.counts[first:].sum())
    return above / window.total if window.total else 0.0
