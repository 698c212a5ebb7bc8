"""How much of each resource the stack used at each step: the utilisations the verdict
compares to find the one that saturates at the knee.

The host's CPU is split between the stack (the components' processes), the load generator
and everything else (neighbours): a tier may use only what the others leave it. What
neighbours at low priority (a positive nice value) use is left out of the host's busy
cores and counted as idle: they give a core up as soon as a tier wants it. A process
group (a component with sampled processes, such as gunicorn with the app inside it) has
its workers, its CPU and the time its threads waited for a core, its cgroup quota and the
periods the kernel throttled it in.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.analyze.context import Context, busy_of, callers_of, resource_of, workers_of
from pinchpoint.analyze.thresholds import IDLE_CORE, NEIGHBOUR_SHARE
from pinchpoint.rundir.shapes import StepJson

HOST = "host"
GENERATOR = "generator"


@dataclass(frozen=True)
class HostUse:
    """The host's CPU at one step, in cores, and its other gauges (None: not measured).
    `busy` leaves out what neighbours at low priority used (`yielding`)."""

    cores: int
    busy: float | None
    stack: float
    generator: float
    generator_wait: float | None
    cpu_pressure: float | None
    yielding: float = 0.0

    @property
    def yielded_cores(self) -> bool:
        """Whether neighbours at low priority held a good share of the cores while the
        rest of the host left some idle: a tier's thread that waited for a core then
        waited for one of theirs to be handed over, not for a free one."""
        return self.yielding > NEIGHBOUR_SHARE * self.cores and self.idle >= IDLE_CORE

    @property
    def neighbours(self) -> float:
        """CPU used by processes outside the stack and the generator."""
        return max(0.0, (self.busy or 0.0) - self.stack - self.generator)

    @property
    def idle(self) -> float:
        return max(0.0, self.cores - (self.busy or 0.0))

    @property
    def utilisation(self) -> float | None:
        return None if self.busy is None else self.busy / self.cores

    @property
    def generator_wait_share(self) -> float | None:
        """The share of the time the generator's threads wanted a core that they waited."""
        if self.generator_wait is None:
            return None
        wanted = self.generator + self.generator_wait
        return self.generator_wait / wanted if wanted > 0 else 0.0


@dataclass(frozen=True)
class GroupUse:
    """One process group at one step."""

    component: str
    busy: float  # requests inside it at a time, by Little's law
    workers: int | None
    cpu: float | None
    cpu_wait: float | None
    quota: float | None
    throttled: float | None
    lock_waits: float | None
    # Processes that serve requests (less a pre-fork master): each computes on one core at
    # most (an interpreter lock, an event loop).
    processes: int | None = None
    # Its threads waited for cores that neighbours at low priority held (HostUse.yielded_cores).
    handed_over: bool = False

    @property
    def pool(self) -> float | None:
        """Worker occupancy: busy workers ÷ workers."""
        return self.busy / self.workers if self.workers else None

    @property
    def demand(self) -> float | None:
        """The cores its threads wanted: what they used plus what they waited for, unless
        the cores they waited for were low-priority neighbours' to hand over."""
        if self.cpu is None:
            return None
        return self.cpu + (0.0 if self.handed_over else (self.cpu_wait or 0.0))

    @property
    def threaded(self) -> bool:
        """Fewer processes than workers: threads (or an event loop's requests) share each
        process's one core."""
        return bool(self.processes and self.workers and self.processes < self.workers)

    @property
    def running(self) -> float:
        """The requests that can compute at once: the busy ones, at most one a worker and
        one a process (threads of one process, or requests of one event loop, share its
        one core)."""
        return max(min([self.busy, *(n for n in (self.workers, self.processes) if n)]), 1e-9)

    @property
    def demand_per_worker(self) -> float | None:
        """The cores each busy worker wanted: near 1 for workers that compute all the time."""
        demand = self.demand
        if demand is None or self.busy <= 0:
            return None
        return demand / self.running

    @property
    def cpu_per_worker(self) -> float | None:
        """The cores each busy worker used, its waits for a core left out."""
        if self.cpu is None or self.busy <= 0:
            return None
        return self.cpu / self.running


def sampled(step: StepJson) -> list[str]:
    """The components whose processes were sampled in a step."""
    return [name for name in step.get("resources", {}) if name not in (HOST, GENERATOR)]


def host_use(step: StepJson, ctx: Context) -> HostUse:
    resources = step.get("resources", {})
    stack = sum(float(resources[n].get("cpu_cores") or 0.0) for n in sampled(step))
    generator = float(resources.get(GENERATOR, {}).get("cpu_cores") or 0.0)
    busy = resource_of(step, HOST, "cpu_cores")
    # Niced CPU beyond the neighbours' is the stack's or the generator's own.
    outside = max(0.0, (busy or 0.0) - stack - generator)
    yielding = min(resource_of(step, HOST, "cpu_nice_cores") or 0.0, outside)
    pressure = resource_of(step, HOST, "cpu_pressure")
    if yielding > NEIGHBOUR_SHARE * ctx.cpu_count:
        pressure = None  # their own waits for the cores they gave up are in it
    return HostUse(
        cores=ctx.cpu_count,
        busy=None if busy is None else busy - yielding,
        stack=stack,
        generator=generator,
        generator_wait=resource_of(step, GENERATOR, "cpu_wait_cores"),
        cpu_pressure=pressure,
        yielding=yielding,
    )


def process_group(tier: str, steps: list[StepJson], ctx: Context) -> str | None:
    """The component whose processes run `tier`: the tier itself when its processes were
    sampled, else the nearest caller whose were (the app runs in gunicorn's workers)."""
    if ctx.unnamed(tier):
        return None
    todo, seen = [tier], set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if any(name in s.get("resources", {}) for s in steps):
            return name
        todo.extend(callers_of(name, ctx))
    return None


def group_use(group: str, step: StepJson, ctx: Context) -> GroupUse:
    return GroupUse(
        component=group,
        busy=busy_of(group, step),
        workers=workers_of(group, step, ctx),
        cpu=resource_of(step, group, "cpu_cores"),
        cpu_wait=resource_of(step, group, "cpu_wait_cores"),
        quota=resource_of(step, group, "cpu_quota_cores"),
        throttled=resource_of(step, group, "cpu_throttled_share"),
        lock_waits=resource_of(step, group, "lock_waits"),
        processes=serving_processes(resource_of(step, group, "processes")),
        handed_over=host_use(step, ctx).yielded_cores,
    )


def serving_processes(processes: float | None) -> int | None:
    """Worker processes: all but a pre-fork master when there are several."""
    if not processes:
        return None
    return int(processes) - 1 if processes > 1 else int(processes)


def usage_table(step: StepJson, ctx: Context) -> dict[str, dict[str, float]]:
    """Per component and for the host, the utilisation of each resource it depends on, at
    one step: worker occupancy, CPU against what it may use, throttled periods, lock
    waits; the host's CPU split by who used it, its link and its disk."""
    host = host_use(step, ctx)
    out: dict[str, dict[str, float]] = {}
    for name in sampled(step):
        use = group_use(name, step, ctx)
        row: dict[str, float] = {}
        if use.pool is not None:
            row["workers"] = round(use.pool, 3)
        if use.cpu is not None:
            available = use.quota or max(host.cores - host.neighbours - host.generator, 1e-9)
            row["cpu"] = round(use.cpu / available, 3)
        if use.demand_per_worker is not None and use.workers:
            row["cores_per_busy_worker"] = round(use.demand_per_worker, 3)
        if use.throttled is not None:
            row["throttled"] = round(use.throttled, 3)
        if use.lock_waits:
            row["lock_waits"] = round(use.lock_waits, 3)
        for way in ("read", "write"):
            limit = resource_of(step, name, f"disk_{way}_limit_bytes_s")
            done = resource_of(step, name, f"disk_{way}_bytes_s")
            if limit and done is not None:
                row[f"disk_{way}"] = round(done / limit, 3)
        out[name] = row
    gauges = {
        "cpu": host.utilisation,
        "cpu_stack_cores": host.stack,
        "cpu_generator_cores": host.generator,
        "cpu_neighbour_cores": host.neighbours if host.busy is not None else None,
        "link": resource_of(step, HOST, "net_util"),
        "disk": resource_of(step, HOST, "disk_util"),
    }
    out[HOST] = {k: round(v, 3) for k, v in gauges.items() if v is not None}
    return out
