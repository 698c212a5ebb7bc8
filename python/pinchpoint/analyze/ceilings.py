"""What the verdict's advice would give: the throughput after the change it advises,
predicted from the run itself, and what would limit next.

Three ceilings bound a change at the heaviest load the plan tested:
- the pool's: a pool of k workers serves k/N of what N served when each holds a request as
  long as before (Little's law); a quota of q' cores serves q'/q of what q served; k
  connections to a callee serve k/c of what the c the callee served at once did;
- the load's: a closed loop of U users sends at most U ÷ one user's shortest cycle (its
  latency and think time at the lightest step), an open loop its target rate;
- the CPU's: each request costs the stack, and the generator beside it, the cores·s D it
  cost at the heaviest step, on the host's cores less what other processes used. In a
  closed loop its users also wait for those cores as they fill: mean value analysis of
  the users cycling through the cores (a queue, by Seidmann's approximation of c servers)
  and the rest of their cycle (a delay), as in Lazowska et al., *Quantitative System
  Performance*, ch. 6 and 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from pinchpoint.analyze.context import Context, load_text, rate_of
from pinchpoint.analyze.knobs import pool_terms
from pinchpoint.analyze.thresholds import CPU_BOUND, CPU_SATURATED, LOAD_BOUND
from pinchpoint.analyze.usage import GroupUse, group_use, host_use, sampled
from pinchpoint.rundir.shapes import StepJson


@dataclass(frozen=True)
class Prediction:
    component: str
    setting: str  # "workers", "processes", "connections" or "cpu_quota_cores"
    now: float
    to: float
    measured_rps: float
    predicted_rps: float
    at_users: int
    at: str  # the load in words: "15 users", "400 req/s"
    # "workers", "processes", "connections", "cpu_quota", "process_cpu", "cpu" or "load"
    limited_by: str
    ceilings: dict[str, float]
    # The change in the server's own settings ("gunicorn --threads 8 → 12"); empty: in
    # the analysis's (the setting, now → to).
    change: str = ""
    # The cores other processes used at the heaviest step, which the CPU's ceiling leaves
    # to them.
    neighbours: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "setting": self.setting,
            "now": self.now,
            "to": self.to,
            "measured_rps": round(self.measured_rps, 1),
            "predicted_rps": round(self.predicted_rps, 1),
            "at_users": self.at_users,
            "limited_by": self.limited_by,
            "ceilings_rps": {k: round(v, 1) for k, v in self.ceilings.items()},
            "line": self.line(),
        }

    def line(self) -> str:
        then = {
            "cpu": "where the host's CPU limits" + self._assuming(),
            "load": "all the load offers: nothing limits before it",
            "cpu_quota": "where the quota limits again",
            "process_cpu": "where each process computes on its one core (its interpreter lock)",
        }.get(self.limited_by, f"where the {self.to:g} {self.setting} limit again")
        if self.limited_by == "workers" and self.setting != "workers":
            then = "where its server's workers limit"
        change = self.change or (
            f"{self.component} {self.setting.replace('_', ' ')} {self.now:g} → {self.to:g}"
        )
        return (
            f"{change}: about {round(self.predicted_rps, 1):.0f} req/s at {self.at} (now "
            f"{round(self.measured_rps, 1):.0f}), "
            f"{then}"
        )

    def _assuming(self) -> str:
        if round(self.neighbours, 2) <= 0:
            return ""
        return f", assuming the other processes keep using {self.neighbours:.2f} cores"


def predict_pool(group: str, steps: list[StepJson], ctx: Context) -> Prediction | None:
    top = steps[-1]
    use, host = group_use(group, top, ctx), host_use(top, ctx)
    if not use.workers:
        return None
    computing = (use.demand_per_worker or 0.0) >= CPU_BOUND
    locked = use.threaded and computing
    setting, now = ("processes", use.processes) if locked else ("workers", use.workers)
    assert now is not None
    terms = pool_terms(group, top, use.processes)
    x = top["throughput_rps"]
    ceilings = {"load": load_ceiling(steps), "cpu": cpu_ceiling(steps, ctx)}
    if use.threaded and not locked and (most := process_cpu_ceiling(use, x)):
        # More threads in the same processes: each process computes on one core at most
        # (its interpreter lock), whatever its threads.
        ceilings["process_cpu"] = most
    if computing:
        # One more worker per idle core: each computes about a core (the cause's advice).
        to = now + max(1, int(host.idle + 0.25))
    else:
        # Enough waiting workers for the first of the other ceilings, busy at most
        # CPU_SATURATED of the time there (past it a pool queues), and in a closed loop
        # no more than one per user.
        to = math.ceil(now * min(ceilings.values()) / (x * CPU_SATURATED))
        if rate_of(top) is None:
            to = min(to, top["users"])
        to = max(now + 1, to)
    to = terms.slots(setting, to)
    found = limited(group, setting, now, to, top, {setting: x * to / now, **ceilings}, ctx)
    return replace(found, change=terms.change(group, setting, now, to))


def predict_quota(group: str, steps: list[StepJson], ctx: Context) -> Prediction | None:
    top, low = steps[-1], steps[0]
    use, host = group_use(group, top, ctx), host_use(top, ctx)
    if not use.quota or not use.cpu:
        return None
    x = top["throughput_rps"]
    others = max(0.0, ctx.cpu_count - host.neighbours - (host.stack - use.cpu) - host.generator)
    to = round(min(2 * use.quota, max(others, use.quota)), 2)
    ceilings = {"cpu_quota": x * to / use.cpu, "cpu": cpu_ceiling(steps, ctx)}
    ceilings["load"] = load_ceiling(steps)
    if use.workers and (workers := workers_ceiling(group, use.workers, low, ctx)):
        ceilings["workers"] = workers  # before the throttling
    return limited(group, "cpu_quota_cores", use.quota, to, top, ceilings, ctx)


def workers_ceiling(group: str, workers: int, low: StepJson, ctx: Context) -> float | None:
    """Requests per second `workers` serve, each holding a request as long as at the
    lightest step (Little's law); None when that step kept none busy."""
    busy = group_use(group, low, ctx).busy
    return workers * low["throughput_rps"] / busy if busy > 0 else None


def process_cpu_ceiling(use: GroupUse, x: float) -> float | None:
    """Requests per second the group's processes serve on one core each (their interpreter
    locks), at the CPU per request `use` shows at `x` requests per second."""
    if not use.processes or not use.cpu:
        return None
    return use.processes * x / use.cpu


def limited(
    group: str,
    setting: str,
    now: float,
    to: float,
    top: StepJson,
    ceilings: dict[str, float],
    ctx: Context,
) -> Prediction:
    limited_by = min(ceilings, key=lambda k: ceilings[k])
    if limited_by == "cpu" and ceilings["cpu"] >= LOAD_BOUND * ceilings["load"]:
        limited_by = "load"  # the users wait little for a core: their own cycle bounds it
    return Prediction(
        component=group,
        setting=setting,
        now=now,
        to=to,
        measured_rps=top["throughput_rps"],
        predicted_rps=ceilings[limited_by],
        at_users=top["users"],
        at=load_text(top),
        limited_by=limited_by,
        ceilings=ceilings,
        # As the CPU's ceiling counts them: none where no tier's processes were sampled.
        neighbours=host_use(top, ctx).neighbours if sampled(top) else 0.0,
    )


def cpu_ceiling(steps: list[StepJson], ctx: Context) -> float:
    """Requests per second the host's cores left by other processes would serve, each
    costing the stack and the generator what it did at the heaviest step; in a closed
    loop, what its users would send while waiting for those cores."""
    top = steps[-1]
    host = host_use(top, ctx)
    x = top["throughput_rps"]
    if sampled(top):
        cost, cores = (host.stack + host.generator) / x, ctx.cpu_count - host.neighbours
    else:  # no tier's processes known: the host's whole use is the stack's
        cost, cores = (host.busy or 0.0) / x, float(ctx.cpu_count)
    if cost <= 0 or cores <= 0:
        return math.inf
    if rate_of(top) is not None:
        return cores / cost
    return closed_loop_rate(top["users"], 1 / _per_user_rate(steps), cost, cores)


def closed_loop_rate(users: int, cycle_s: float, cpu_s: float, cores: float) -> float:
    """Mean value analysis: the rate of `users` each cycling in `cycle_s` when alone, of
    which `cpu_s` on `cores` shared cores (Seidmann: a queue of cpu_s/cores and a delay of
    the rest), the users waiting for a core as it fills."""
    queue_s = cpu_s / cores
    delay_s = max(cycle_s - queue_s, 0.0)
    rate, waiting = 0.0, 0.0
    for n in range(1, users + 1):
        at_cores = queue_s * (1 + waiting)
        rate = n / (delay_s + at_cores)
        waiting = rate * at_cores
    return rate


def load_ceiling(steps: list[StepJson]) -> float:
    """The most the heaviest step's load can send: its target rate in open loop; in closed
    loop its users, each at the shortest cycle one user had (answer and think time)."""
    top = steps[-1]
    rate = rate_of(top)
    if rate is not None:
        return rate
    return top["users"] * _per_user_rate(steps)


def _per_user_rate(steps: list[StepJson]) -> float:
    """The most one user sent a second: at its shortest cycle (answer and think time)."""
    return max(s["throughput_rps"] / s["users"] for s in steps if s["users"] > 0)
