"""The plan's `[[abort]]` rules watched each second: the metrics of each second the run
computes (`second_metrics`), and the rule that has held past its limit for `for_s`,
judged from `after_s` of the run on, which stops the run as a first Ctrl-C does.

A metric a second cannot give (a latency in a second with no response, a share in a
second with no request) leaves its rule as it was."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pinchpoint.load.interrupts as interrupts
from pinchpoint.load.abort import Abort, AbortWatch, _window
from pinchpoint.plan.abort import AbortRule
from pinchpoint.plan.sla import Sla

if TYPE_CHECKING:
    from pinchpoint.load.hdr import Histogram


@dataclass
class RuleAbort(Abort):
    """An abort by a `[[abort]]` rule: its metric, limit and value."""

    above: bool = True

    def reason(self) -> str:
        side = "above" if self.above else "below"
        load = f"{self.level:g} req/s" if self.kind == "rate" else f"{self.level:g} users"
        held = f" for {self.broken_s:.0f} s" if self.broken_s >= 1 else ""
        return (
            f"[[abort]] {self.objective} {side} {self.limit:g}{held} in step {self.step} "
            f"({load}): {self.objective} was {self.value:.4g}"
        )


@dataclass
class Previous:
    """What the last snapshot said, for the counters' differences."""

    requests: int = 0
    errors: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    at: float | None = None


def second_metrics(snapshot: dict[str, Any], before: Previous, now: float) -> dict[str, float]:
    """The metrics of the second since `before` (updated to this snapshot), by name;
    a metric the second cannot give is left out. Percentiles are under `window`."""
    sent = int(snapshot.get("requests", 0)) - before.requests
    failed = int(snapshot.get("errors", 0)) - before.errors
    classes = snapshot.get("errors_by_class") or {}
    seconds = float(snapshot["seconds"]) if "seconds" in snapshot else None
    if seconds is None:
        seconds = now - before.at if before.at is not None else 1.0
    out: dict[str, float] = {"users": float(snapshot.get("users", 0))}
    if seconds > 0:
        out["rps"] = sent / seconds
    if sent > 0:
        out["error_rate"] = failed / sent
        for name in ("http_4xx", "http_5xx"):
            out[f"{name}_rate"] = (classes.get(name, 0) - before.classes.get(name, 0)) / sent
    if "in_flight" in snapshot:
        out["in_flight"] = float(snapshot["in_flight"])
    if "send_lag_max_us" in snapshot:
        out["send_lag_ms"] = int(snapshot["send_lag_max_us"]) / 1000
    before.requests, before.errors = (
        int(snapshot.get("requests", 0)),
        int(snapshot.get("errors", 0)),
    )
    before.classes = dict(classes)
    before.at = now
    return out


@dataclass
class RuleWatch:
    """Judges each second's snapshot against the plan's `[[abort]]` rules."""

    rules: list[AbortRule]
    started: float
    before: Previous = field(default_factory=Previous)
    since: dict[int, float] = field(default_factory=dict)
    fired: Abort | None = None

    @classmethod
    def of(cls, rules: list[AbortRule]) -> RuleWatch | None:
        """The watch of a plan's rules from now (the run's start), None without any."""
        return cls(list(rules), time.monotonic()) if rules else None

    def observe(self, snapshot: dict[str, Any], now: float) -> Abort | None:
        """The abort, the first time a rule has held past its limit for its for_s."""
        if self.fired is not None:
            return None
        metrics = second_metrics(snapshot, self.before, now)
        window = _window(snapshot) if snapshot.get("window_requests") else None
        for at, rule in enumerate(self.rules):
            value = _value(rule, metrics, window)
            if now - self.started < rule.after_s:
                continue
            if value is None:
                continue
            if not rule.passes(value):
                self.since.pop(at, None)
                continue
            start = self.since.setdefault(at, now)
            # A second judged past the limit counts as a whole second past it.
            held = now - start + 1.0
            if held >= rule.for_s:
                self.fired = RuleAbort(
                    rule.metric, rule.limit, value, int(snapshot.get("step", 0)),
                    float(snapshot.get("level", 0.0)) or float(snapshot.get("users", 0)),
                    str(snapshot.get("kind", "users")), held, rule.above is not None,
                )  # fmt: skip
                return self.fired
        return None


def _value(rule: AbortRule, metrics: dict[str, float], window: Histogram | None) -> float | None:
    """The rule's metric this second, None when the second cannot give it."""
    percentile = rule.percentile()
    if percentile is None and rule.metric not in ("mean_ms", "max_ms"):
        return metrics.get(rule.metric)
    if window is None:
        return None
    if rule.metric == "mean_ms":
        return float(window.mean()) / 1000
    quantile = 1.0 if rule.metric == "max_ms" else float(percentile or 0.0) / 100
    return float(window.value_at_quantile(quantile)) / 1000


@dataclass
class Watches:
    """The `[sla]` objectives that abort and the `[[abort]]` rules, judged on the same
    seconds: the first to fire stops the run."""

    each: list[AbortWatch | RuleWatch]

    @classmethod
    def of(cls, sla: Sla | None, rules: list[AbortRule]) -> Watches | None:
        """The watches of a plan, None when nothing aborts."""
        each = [w for w in (AbortWatch.of(sla), RuleWatch.of(rules)) if w is not None]
        return cls(each) if each else None

    @property
    def fired(self) -> Abort | None:
        return next((w.fired for w in self.each if w.fired is not None), None)

    def observe(self, snapshot: dict[str, Any], now: float) -> Abort | None:
        """The abort, the first time one of the watches fires; each sees every second."""
        fired = [w.observe(snapshot, now) for w in self.each]
        return next((f for f in fired if f is not None), None)

    def judge(self, snapshot: dict[str, Any]) -> Abort | None:
        """The abort when this second breaks an aborting objective (or passes an
        [[abort]] rule's limit) for long enough; said on stderr at once, as a signal's
        stop is."""
        fired = self.observe(snapshot, time.monotonic())
        if fired is not None and (caught := interrupts.active()) is not None:
            caught.tell(f"{fired.reason()}: stopping after the requests in flight")
        return fired
