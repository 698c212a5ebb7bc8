"""Each app server's pool size, found rather than told: the plan's `workers` when it gives
one (an override), else what the server's own command line and config files say (read at
collection, `collect/servers/`), else Little's law: concurrency in the tier that stops
rising at N while the queue before it keeps growing is a full pool of about N, whatever
its configuration. A size from the process count alone is not trusted to call a pool of
waiting workers full: an event loop or a thread pool holds many requests per process.

Little's law reads a floor where each worker process computes a full core: the threads of
one process share its interpreter lock, and a request waits for it before a thread takes
it, outside the time the server logs. The threads counted in those processes then give
the ceiling, and the size is the range between."""

from __future__ import annotations

import math
from collections import Counter

from pinchpoint.analyze.causes.queues import queue_grows
from pinchpoint.analyze.context import Context, busy_of, load_text, resource_of
from pinchpoint.analyze.pool_size import INFERRED, PLAN, SERVER, PoolSize
from pinchpoint.analyze.thresholds import (
    CPU_BOUND,
    POOL_FLAT_RATIO,
    POOL_LOAD_GROWTH,
    POOL_READS_LOW,
)
from pinchpoint.rundir.shapes import StepJson


def pool_sizes(steps: list[StepJson], ctx: Context) -> dict[str, PoolSize]:
    """The pool of every component with sampled processes or a plan's `workers`."""
    names = {name for s in steps for name in s.get("resources", {})} - {"host", "generator"}
    found = {}
    for name in sorted(names | set(ctx.workers)):
        size = _size(name, steps, ctx)
        if size is not None:
            found[name] = size
    return found


def _size(name: str, steps: list[StepJson], ctx: Context) -> PoolSize | None:
    if name in ctx.workers:
        return PoolSize(ctx.workers[name], PLAN, "the plan's workers")
    told = _from_server(name, steps)
    if told is not None:
        return told
    if ctx.roles.get(name) in ("proxy", "database") or _event_loop(name, steps):
        # An event loop holds any number of waiting requests: it has no slots to infer.
        return None
    return inferred(name, steps)


def _event_loop(name: str, steps: list[StepJson]) -> bool:
    return any(s.get("resources", {}).get(name, {}).get("pool_kind") == "async" for s in steps)


def _from_server(name: str, steps: list[StepJson]) -> PoolSize | None:
    rows = [s.get("resources", {}).get(name, {}) for s in steps]
    slots = Counter(r["pool_slots"] for r in rows if r.get("pool_slots"))
    if not slots:
        return None
    size = slots.most_common(1)[0][0]
    source = next(r.get("pool_source") for r in rows if r.get("pool_slots") == size)
    kind = next(r.get("pool_kind") for r in rows if r.get("pool_slots") == size)
    what = {"threads": "processes × threads", "sync": "one request per process"}.get(kind or "", "")
    return PoolSize(size, SERVER, f"{what}, from {source}" if what else f"from {source}")


def inferred(name: str, steps: list[StepJson]) -> PoolSize | None:
    """A pool read from Little's law: the tier's concurrency flat over the heaviest steps
    while the load grew and the queue before the tier grew far more than its own time."""
    best = None
    for first in range(len(steps) - 2, -1, -1):
        tail = steps[first:]
        if not _flat(name, tail):
            break
        if _grew(tail) and queue_grows(name, tail):
            best = tail
    if best is None:
        return None
    peak = max(busy_of(name, s) for s in best)
    slots = max(1, math.ceil(peak - POOL_READS_LOW))
    source = (
        f"inferred by Little's law: {peak:.2f} requests at once from {load_text(best[0])} to "
        f"{load_text(best[-1])} while the queue before it grew"
    )
    most = _threads_if_locked(name, best[-1])
    if most is not None and most > slots:
        return PoolSize(
            slots,
            INFERRED,
            f"{source}, a floor: each of its {_serving(best[-1], name)} worker process"
            f"{'es' if (_serving(best[-1], name) or 0) > 1 else ''} computes a full core, so "
            f"requests wait for its interpreter lock before a thread takes them; {most} threads "
            "counted in its processes, less the master's",
            most,
        )
    return PoolSize(slots, INFERRED, source)


def _serving(step: StepJson, name: str) -> int | None:
    processes = resource_of(step, name, "processes")
    if not processes:
        return None
    return int(processes) - 1 if processes > 1 else int(processes)


def _threads_if_locked(name: str, step: StepJson) -> int | None:
    """The threads that may hold a request (all but a pre-fork master's), when every worker
    process wanted about a core (used plus waited): Little's law then reads the lock's
    limit, not the slots."""
    serving, threads = _serving(step, name), resource_of(step, name, "threads")
    cpu = resource_of(step, name, "cpu_cores")
    if not serving or not threads or cpu is None:
        return None
    demand = cpu + (resource_of(step, name, "cpu_wait_cores") or 0.0)
    if demand < CPU_BOUND * serving:
        return None
    processes = resource_of(step, name, "processes") or 1
    return int(threads) - (1 if processes > 1 else 0)


def _flat(name: str, tail: list[StepJson]) -> bool:
    busy = [busy_of(name, s) for s in tail]
    return min(busy) > 0 and max(busy) <= POOL_FLAT_RATIO * min(busy)


def _grew(tail: list[StepJson]) -> bool:
    def load(step: StepJson) -> float:
        return float(step.get("level") or step["users"] or 0)

    return load(tail[-1]) >= POOL_LOAD_GROWTH * max(load(tail[0]), 1e-9)
