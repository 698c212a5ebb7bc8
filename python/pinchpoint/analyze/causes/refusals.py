"""A proxy that refuses requests beyond its limit while the tier behind it idles."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Cause, Finding, Judged, RunAsk
from pinchpoint.analyze.context import (
    Context,
    busy_of,
    cpu_of,
    load_text,
    ms_text,
    rate_of,
    workers_of,
)
from pinchpoint.analyze.findings import pct
from pinchpoint.analyze.thresholds import FAST_ERRORS, IDLE_POOL, PROXY_ERRORS, REFUSED_SHARE
from pinchpoint.rundir.shapes import StepJson

REFUSALS = frozenset({"503", "502", "429", "reset", "closed", "connect_refused"})

CONNECTION_REFUSALS = frozenset({"reset", "closed", "connect_refused"})


def proxy_limit(steps: list[StepJson], ctx: Context) -> Finding | None:
    """Requests fail fast at a tier that answers them itself, while the tier behind idles."""
    base, top = steps[0], steps[-1]
    top_rate, base_rate = top.get("error_rate", 0.0), base.get("error_rate", 0.0)
    if top_rate < PROXY_ERRORS or base_rate > top_rate / 2:
        return None
    classes = top.get("errors_by_class", {})
    refused = {c: n for c, n in classes.items() if c in REFUSALS}
    if sum(refused.values()) < REFUSED_SHARE * max(top["errors"], 1):
        return None
    failed_ms, ok_ms = top.get("error_latency_p50_ms"), top["latency_ms"]["p50"]
    if failed_ms is None or (ok_ms is not None and failed_ms > FAST_ERRORS * ok_ms):
        return None
    proxy = _refusing_tier(top, ctx, refused)
    if proxy is None:
        return None
    onset = next(s for s in steps if s.get("error_rate", 0.0) >= PROXY_ERRORS)
    behind = [_idle_line(callee, top, ctx) for callee in ctx.calls.get(proxy, [])]
    evidence = [
        f"{pct(top['error_rate'])} of requests failed at {load_text(top)} ("
        + ", ".join(f"{n} × {c}" for c, n in sorted(refused.items()))
        + f"), {pct(base['error_rate'])} at {load_text(base)}",
        f"failed requests took {ms_text(failed_ms)} (p50) against "
        f"{ms_text(ok_ms or 0.0)} for answered ones: refused at once, not timed out",
        _refusal_line(proxy, top, ctx),
        *[line for line in behind if line],
    ]
    callees = " and ".join(ctx.calls.get(proxy, [])) or "the tier behind it"
    summary = (
        f"{proxy} refuses requests beyond its limit from {load_text(onset)}: "
        f"{pct(top['error_rate'])} failed at once at {load_text(top)} while "
        f"{callees} had room. {REFUSED.advice}"
    )
    name = f"{proxy} connection limit"
    return Finding(proxy, REFUSED, onset["users"], evidence, name, summary, rate_of(onset))


def _refusing_tier(top: StepJson, ctx: Context, refused: dict[str, int]) -> str | None:
    """The tier that answered the failures itself; the entry tier for connection errors
    that no tier logged."""
    tiers = top.get("tiers", {})
    for name in ctx.order:
        if (tiers.get(name, {}).get("rejected") or 0) >= 0.5 * top["errors"]:
            return name
    if ctx.order and set(refused) <= CONNECTION_REFUSALS:
        return ctx.order[0]
    return None


def _refusal_line(proxy: str, top: StepJson, ctx: Context) -> str:
    rejected = top.get("tiers", {}).get(proxy, {}).get("rejected")
    callees = " or ".join(ctx.calls.get(proxy, [])) or "anything"
    if not rejected:
        return f"no tier logged these failures: the connections were refused before {proxy}"
    return (
        f"{proxy} answered {rejected} requests itself with an error at "
        f"{load_text(top)}, without calling {callees}"
    )


def _idle_line(callee: str, top: StepJson, ctx: Context) -> str | None:
    if callee not in top.get("tiers", {}):
        return None
    busy, workers = busy_of(callee, top), workers_of(callee, top, ctx)
    cpu = cpu_of(top, callee)
    room = f" against {workers} workers" if workers else ""
    state = "it had room" if not workers or busy < IDLE_POOL * workers else "it was full too"
    used = f", its processes used {cpu:.2f} cores" if cpu is not None else ""
    return (
        f"behind it, {callee} ran {busy:.2f} requests at a time (Little's law){room}{used}: {state}"
    )


def _judge_refusals(ask: RunAsk) -> Judged | None:
    found = proxy_limit(ask.steps, ask.ctx)
    return Judged(found, refused_share(ask.steps[-1])) if found is not None else None


def refused_share(top: StepJson) -> float:
    """How sure a proxy's limit is: half, and half again the share of the heaviest step's
    failures that were refusals."""
    by_class = top.get("errors_by_class") or {}
    failed = sum(by_class.values())
    refused = sum(n for name, n in by_class.items() if name in REFUSALS)
    return 0.5 + 0.5 * refused / failed if failed else 0.5


# Asked of the whole run, before any tier's time: refused requests never reach the tiers.
REFUSED = Cause(
    name="refused",
    resource="proxy_limit",
    scope="run",
    doc=__doc__,
    advice=(
        "Raise the proxy's limit (limit_conn, max_conns, maxconn) to what the tier behind "
        "it can take, or queue instead of refusing."
    ),
    saturates="a proxy's connection limit, refusing",
    reads=("error_rate", "errors_by_class", "error_latency_p50_ms", "tiers.rejected"),
    thresholds=("FAST_ERRORS", "IDLE_POOL", "PROXY_ERRORS", "REFUSED_SHARE"),
    needs_cpu=False,
    judge=_judge_refusals,
)
