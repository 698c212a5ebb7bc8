"""What the live page shows, built from the engine's snapshot of each second: the rows
of the last seconds, a table of the steps so far, and the verdict so far (the knee of the
steps that ended, found as the analysis finds it)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pinchpoint.analyze.knee import find_knee
from pinchpoint.load.hdr import Histogram, decode_v2
from pinchpoint.outputs.seconds import kinds_since
from pinchpoint.terminal.live import second

# Seconds kept for a page that opens late: half an hour of the charts.
MAX_ROWS = 1800
MAX_STEPS = 256


@dataclass
class StepSoFar:
    """One step's seconds as the ticks gave them."""

    step: int
    load: str
    level: float
    rate: bool
    seconds: float = 0.0
    requests: int = 0
    errors: int = 0
    counts: np.ndarray | None = None
    # Records and errors of each kind (request, ws_session, grpc_call, ...).
    kinds: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(
        self,
        row: dict[str, Any],
        counts: np.ndarray | None,
        seconds: float,
        kinds: dict[str, dict[str, int]],
    ) -> None:
        self.seconds += seconds
        self.requests += int(row["requests"])
        self.errors += int(row["errors"])
        for kind, n in kinds.items():
            mine = self.kinds.setdefault(kind, {"requests": 0, "errors": 0})
            mine["requests"] += n["requests"]
            mine["errors"] += n["errors"]
        if counts is not None:  # decode_v2 gives every window the same length
            if self.counts is None:
                self.counts = counts.copy()
            else:
                self.counts += counts

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "load": self.load,
            "level": self.level,
            "seconds": round(self.seconds, 3),
            "requests": self.requests,
            "errors": self.errors,
            "throughput": self.requests / self.seconds if self.seconds else 0.0,
        }
        if set(self.kinds) - {"request"}:  # a WebSocket's or gRPC's records, apart
            out["kinds"] = {k: dict(n) for k, n in self.kinds.items()}
        if self.counts is not None and self.counts.sum():
            hist = Histogram.of_counts(self.counts)
            out["mean_ms"] = hist.mean() / 1000
            for name, q in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)):
                out[name] = hist.value_at_quantile(q) / 1000
        return out


@dataclass
class LiveRun:
    """Fed one snapshot a second; says what changed, and everything for a new page."""

    run_id: str
    rows: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_ROWS))
    steps: dict[int, StepSoFar] = field(default_factory=dict)
    verdict: str = "no knee yet"
    stage: str = "load"
    _last: dict[str, Any] | None = None

    def add(self, snapshot: dict[str, Any], elapsed_s: float) -> dict[str, Any]:
        """The `second` event of this snapshot: its row, its step so far, the verdict."""
        row = second(snapshot, self._last, elapsed_s)
        before = (self._last or {}).get("by_kind") or {}
        kinds = kinds_since(snapshot.get("by_kind") or {}, before)
        row = {k: v for k, v in row.items() if k not in ("total", "total_errors")} | {
            "total": int(snapshot.get("requests", 0)),
            "total_errors": int(snapshot.get("errors", 0)),
        }
        self._last = snapshot
        self.rows.append(row)
        data = snapshot.get("window_hdr_v2")
        counts = decode_v2(bytes(data)) if data else None
        step = int(row["step"])
        ended = step not in self.steps and bool(self.steps)
        if step not in self.steps:
            if len(self.steps) >= MAX_STEPS:
                del self.steps[min(self.steps)]
            rate = snapshot.get("kind") == "rate"
            level = float(snapshot.get("level", 0.0)) if rate else float(snapshot.get("users", 0))
            self.steps[step] = StepSoFar(step, str(row["load"]), level, rate)
        self.steps[step].add(row, counts, float(snapshot.get("seconds", 1.0)), kinds)
        if ended:
            self.verdict = self.verdict_so_far(step)
        return {"row": row, "step": self.steps[step].summary(), "verdict": self.verdict}

    def verdict_so_far(self, current: int) -> str:
        """The knee of the steps before `current`, as the analysis would find it on them."""
        ended = [s for k, s in sorted(self.steps.items()) if k < current]
        done = [s.summary() for s in ended]
        done = [s for s in done if "mean_ms" in s]
        if len(done) < 3:
            return f"no knee yet: {len(done)} step{'' if len(done) == 1 else 's'} ended, 3 needed"
        knee = find_knee(
            [s["level"] for s in done],
            [s["throughput"] for s in done],
            [s["mean_ms"] for s in done],
        )
        unit = "req/s offered" if ended[0].rate else "users"
        if knee is None:
            return f"no knee yet: throughput still scales up to {done[-1]['load']}"
        return (
            f"knee near {knee.load:.3g} {unit} (95% interval {knee.ci_low:.3g}–"
            f"{knee.ci_high:.3g}), {knee.throughput_at_knee:.4g} req/s there"
        )

    def state(self) -> dict[str, Any]:
        """Everything a page that opens now needs."""
        return {
            "run_id": self.run_id,
            "rows": list(self.rows),
            "steps": [s.summary() for _, s in sorted(self.steps.items())],
            "verdict": self.verdict,
            "stage": self.stage,
        }
