"""An event loop is no pool of workers: one thread serves any number of requests while
they wait, and computes on one core. So a loop that serves about one request at a time
(peak throughput × shortest time, Little's law, near its number of processes) while it
uses almost no CPU and what it calls stays fast is blocked: a synchronous call inside an
async handler (a blocking client, time.sleep, a file read) holds the loop, and nothing
else runs on it until the call returns. The fix is in the code — await the call, or run
it in a thread — and more worker processes only hide it. A loop that computes a core each
is limited by its cores, not blocked: the CPU's causes name it.
"""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause
from pinchpoint.analyze.context import Context, below, load_text, ms_text, rate_of
from pinchpoint.analyze.findings import Finding
from pinchpoint.analyze.thresholds import CPU_NEED, GROWTH_SHARE, LOOP_LOAD, ONE_AT_ONCE
from pinchpoint.analyze.usage import group_use, serving_processes

ASYNC = "async"


def is_event_loop(group: str, steps: list[dict]) -> bool:
    """Whether the group's server said it runs an event loop in each process."""
    return any(s.get("resources", {}).get(group, {}).get("pool_kind") == ASYNC for s in steps)


def blocked_loop(ask: Ask) -> Finding | None:
    """The tier's event loops blocked by a synchronous call; None where they hold several
    requests at once, compute, or wait on a callee that grew."""
    group, steps, ctx = ask.group, ask.steps, ask.ctx
    if group is None or ask.estimate is None or not is_event_loop(group, steps):
        return None
    top = steps[-1]
    loops = serving_processes(top.get("resources", {}).get(group, {}).get("processes"))
    if not loops or top.get("kind", "users") != "users" or top["users"] < LOOP_LOAD * loops:
        return None
    at_once = float(ask.estimate["workers"])
    use = group_use(group, top, ctx)
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
    return Finding(group, "event_loop", ask.onset["users"], evidence, name, summary,
                   rate_of(ask.onset))  # fmt: skip


def _callees(tier: str, steps: list[dict], ctx: Context) -> list[tuple[str, float, float]]:
    """Each logged tier below this one: its median at the lightest and heaviest steps."""
    out = []
    for callee in below(tier, ctx)[1:]:
        a, b = (s["tiers"].get(callee, {}).get("p50_ms") for s in (steps[0], steps[-1]))
        if a is not None and b is not None:
            out.append((callee, float(a), float(b)))
    return out


def _callee_grew(tier: str, steps: list[dict], ctx: Context) -> bool:
    return any(b - a > max(1.0, GROWTH_SHARE * a) for _, a, b in _callees(tier, steps, ctx))


def _callee_lines(tier: str, steps: list[dict], ctx: Context) -> list[str]:
    return [
        f"{callee} p50 {ms_text(a)} → {ms_text(b)}: what the loop calls stays fast"
        for callee, a, b in _callees(tier, steps, ctx)
    ]


EVENT_LOOP = Cause(
    resource="event_loop",
    saturates="an event loop a synchronous call blocks",
    reads=("pools", "resources.cpu_cores", "resources.processes", "tiers.p50_ms"),
    needs_cpu=False,
    fills_above=True,
    find=blocked_loop,
)
