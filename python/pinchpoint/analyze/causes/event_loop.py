"""An event loop is no pool of workers: one thread serves any number of requests while
they wait, and computes on one core. So a loop that serves about one request at a time
(peak throughput × shortest time, Little's law, near its number of processes) while it
uses almost no CPU and what it calls stays fast is blocked: a synchronous call inside an
async handler (a blocking client, time.sleep, a file read) holds the loop, and nothing
else runs on it until the call returns. The fix is in the code — await the call, or run
it in a thread — and more worker processes only hide it.

A loop that computes is one core: where each of its loops wants a core while the host has
idle ones, the loops are too few (more processes, in the server's own terms), or the work
belongs off the loop. On a full host the CPU's causes name it.
"""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.context import Context, below, load_text, ms_text, rate_of
from pinchpoint.analyze.thresholds import (
    CPU_BOUND,
    CPU_NEED,
    GROWTH_SHARE,
    IDLE_CORE,
    LOOP_LOAD,
    ONE_AT_ONCE,
)
from pinchpoint.analyze.usage import group_use, host_use, serving_processes
from pinchpoint.rundir.shapes import StepJson

ASYNC = "async"


# Each server's knob for more loops, and its way to compute off the loop.
_MORE_LOOPS = {
    "uvicorn": "uvicorn's --workers",
    "gunicorn": "gunicorn's --workers (each a uvicorn worker)",
    "hypercorn": "hypercorn's --workers",
    "daphne": "more daphne processes behind the proxy",
    "node": "Node's cluster workers (the cluster module, or PM2's -i)",
}
_OFF_LOOP = {
    "node": "worker_threads",
}
_PYTHON_OFF_LOOP = "a process pool (loop.run_in_executor with a ProcessPoolExecutor)"


def _server(group: str, steps: list[StepJson]) -> str:
    found = [s.get("resources", {}).get(group, {}).get("pool_server") for s in steps]
    return next((str(f) for f in reversed(found) if f), group)


def is_event_loop(group: str, steps: list[StepJson]) -> bool:
    """Whether the group's server said it runs an event loop in each process."""
    return any(s.get("resources", {}).get(group, {}).get("pool_kind") == ASYNC for s in steps)


def blocked_loop(ask: Ask) -> Finding | None:
    """The tier's event loops blocked by a synchronous call, or computing a core each on a
    host with idle cores; None where they hold several requests at once, wait on a callee
    that grew, or compute on a full host."""
    group, steps, ctx = ask.group, ask.steps, ask.ctx
    if group is None or ask.estimate is None or not is_event_loop(group, steps):
        return None
    top = steps[-1]
    loops = serving_processes(top.get("resources", {}).get(group, {}).get("processes"))
    if not loops or top.get("kind", "users") != "users" or top["users"] < LOOP_LOAD * loops:
        return None
    at_once = float(ask.estimate["workers"])
    use = group_use(group, top, ctx)
    if use.demand is not None and use.demand >= CPU_BOUND * loops:
        return computing_loops(ask, loops)
    if at_once > ONE_AT_ONCE * loops or use.demand is None or use.demand >= CPU_NEED * loops:
        return None
    if _callee_grew(ask.tier, steps, ctx):
        return None
    some = f"{loops} event loops" if loops > 1 else "its event loop"
    runs = f"an event loop in each of {loops} processes" if loops > 1 else "one event loop"
    evidence = [
        f"{group} runs {runs} (its server's settings), each of which holds any number of "
        "waiting requests",
        f"peak throughput × shortest time ({ask.estimate['peak_throughput_rps']:.0f} req/s × "
        f"{ms_text(ask.estimate['min_latency_ms'])}) is {at_once:.2f} requests at once: about "
        f"one a loop, while {top['users']} users each kept one in flight",
        f"{group}'s processes used {use.cpu or 0.0:.2f} cores at {load_text(top)}: the loops "
        "wait without computing",
        *_callee_lines(ask.tier, steps, ctx),
    ]
    summary = (
        f"{group} serves about one request at a time on {some} from {load_text(ask.onset)}, "
        "while it uses almost no CPU and what it calls stays fast: a synchronous call inside "
        "an async handler blocks the loop, and nothing else runs on it until the call "
        "returns. The fix is in the code: await the call (an async client) or run it in a "
        "thread (asyncio.to_thread, run_in_executor); more worker processes only hide it."
    )
    name = f"{group}'s event loop, blocked by a synchronous call"
    return Finding(group, EVENT_LOOP, ask.onset["users"], evidence, name, summary,
                   rate_of(ask.onset))  # fmt: skip


def computing_loops(ask: Ask, loops: int) -> Finding | None:
    """The group's event loops each wanting a core while the host has idle cores: too few
    loops for the host, or work that belongs off the loop. None on a full host (the CPU's
    causes name it)."""
    group, steps, ctx = ask.group, ask.steps, ask.ctx
    assert group is not None
    top = steps[-1]
    host = host_use(top, ctx)
    if host.idle < IDLE_CORE:
        return None
    use = group_use(group, top, ctx)
    server = _server(group, steps)
    more = _MORE_LOOPS.get(server, f"more {server} processes")
    off = _OFF_LOOP.get(server, _PYTHON_OFF_LOOP)
    some = f"each of its {loops} event loops computes" if loops > 1 else "its event loop computes"
    evidence = [
        f"{group} runs {loops} event loop{'s' if loops > 1 else ''}, each on one core: its "
        f"processes used {use.cpu or 0.0:.2f} cores and waited for {use.cpu_wait or 0.0:.2f} "
        f"more at {load_text(top)}",
        f"the host had {host.idle:.1f} idle cores at {load_text(top)}",
    ]
    summary = (
        f"{group}: {some} a full core from {load_text(ask.onset)}, while the host still had "
        f"{host.idle:.1f} idle cores: requests wait for the loop while it computes. Add loops "
        f"({more}, up to {loops + int(host.idle + 0.25)}, one per idle core), or move the "
        f"computing off the loop ({off}); more threads will not help."
    )
    name = f"{group}'s event loop{'s' if loops > 1 else ''} ({loops}, one core each)"
    return Finding(
        group, BUSY_LOOPS, ask.onset["users"], evidence, name, summary, rate_of(ask.onset)
    )


def _callees(tier: str, steps: list[StepJson], ctx: Context) -> list[tuple[str, float, float]]:
    """Each logged tier below this one: its median at the lightest and heaviest steps."""
    out = []
    for callee in below(tier, ctx)[1:]:
        a, b = (s["tiers"].get(callee, {}).get("p50_ms") for s in (steps[0], steps[-1]))
        if a is not None and b is not None:
            out.append((callee, float(a), float(b)))
    return out


def _callee_grew(tier: str, steps: list[StepJson], ctx: Context) -> bool:
    return any(b - a > max(1.0, GROWTH_SHARE * a) for _, a, b in _callees(tier, steps, ctx))


def _callee_lines(tier: str, steps: list[StepJson], ctx: Context) -> list[str]:
    return [
        f"{callee} p50 {ms_text(a)} → {ms_text(b)}: what the loop calls stays fast"
        for callee, a, b in _callees(tier, steps, ctx)
    ]


EVENT_LOOP = Cause(
    name="event_loop",
    resource="event_loop",
    scope="tier",
    doc=__doc__,
    advice=(
        "Await the call (an async client) or run it in a thread (asyncio.to_thread, "
        "run_in_executor); more worker processes only hide it."
    ),
    saturates="an event loop a synchronous call blocks",
    reads=(
        "pools",
        "resources.cpu_cores",
        "resources.processes",
        "tiers.p50_ms",
        "resources.pool_kind",
    ),
    thresholds=("CPU_BOUND", "CPU_NEED", "GROWTH_SHARE", "LOOP_LOAD", "ONE_AT_ONCE"),
    needs_cpu=False,
    find=blocked_loop,
)
# Found by the event loop's cause: loops that each compute a core on a host with idle ones.
BUSY_LOOPS = Cause(
    name="busy_loops",
    resource="cpu",
    scope="within",
    doc=computing_loops.__doc__ or "",
    advice="Add event loops, one per idle core, or move the computing off the loop.",
    saturates="the one core each event loop computes on",
    reads=("resources.cpu_cores", "resources.cpu_wait_cores", "resources.processes"),
    thresholds=("CPU_BOUND", "IDLE_CORE"),
    needs_cpu=True,
    computes=True,
    database="statements",
    effect_of_one_at_a_time=True,
)
