"""The load generator and the host it runs on: when the generator cannot keep up, or its
threads wait for a core, every latency includes its own delay and the run measures the
generator, not the target. A generator at its limit while most answers were refusals a
tier gave at once (a proxy's connection limit) measured those refusals, not its own
delay: it does not limit, and the refusals are the finding.
"""

from __future__ import annotations

from typing import Any

from pinchpoint.analyze.causes.cause import Cause, Finding, Judged, RunAsk
from pinchpoint.analyze.causes.refusals import REFUSALS
from pinchpoint.analyze.context import Context, load_text, rate_of
from pinchpoint.analyze.thresholds import (
    CPU_SATURATED,
    FAST_ERRORS,
    GENERATOR_SATURATED,
    GENERATOR_SHARE,
    MOSTLY_ANSWERED,
    OUTSIDE_SHARE,
    STARVED_CORES,
    STARVED_DELAY,
    STARVED_SHARE,
)
from pinchpoint.analyze.usage import HostUse, host_use
from pinchpoint.rundir.shapes import StepJson

# Past this share of a step's requests refused at once, the generator was busy with them.
MOST_REFUSED = 0.5


def generator_check(steps: list[StepJson], ctx: Context) -> dict[str, Any]:
    """Whether the generator, or the host it runs on, limited the run."""
    hosts = [host_use(s, ctx) for s in steps]
    peak = max((h.generator for h in hosts), default=0.0)
    # Threads that ran or waited for a core all the time never waited for an answer: a
    # closed loop that computes flat out, whether or not the host gave it the cores.
    wanted = max((_wanted(h) for h in hosts), default=0.0)
    shares = [h.generator_wait_share or 0.0 for h in hosts]
    delayed = [_delayed(h, s, share, ctx) for h, s, share in zip(hosts, steps, shares, strict=True)]
    at_limit = [
        s
        for h, s, late in zip(hosts, steps, delayed, strict=True)
        if late
        or _busy_with_generator(h)
        or _wanted(h) >= GENERATOR_SATURATED * ctx.generator_threads
    ]
    check = {
        "saturated": wanted >= GENERATOR_SATURATED * ctx.generator_threads,
        "host_saturated": any(_busy_with_generator(h) for h in hosts),
        # At most of the steps: a generator delayed at one step is noise, not the run.
        "starved": bool(delayed) and sum(delayed) >= 0.5 * len(delayed),
        # Where it was at its limit (the heaviest step when no step shows which).
        "refusals": bool(steps) and all(_fast_refusals(s) for s in at_limit or steps[-1:]),
        "cpu_cores_max": round(peak, 3),
        "cpu_wanted_max": round(wanted, 3),
        "cpu_wait_share_max": round(max(shares, default=0.0), 3),
        "threads": ctx.generator_threads,
    }
    return _with_worst_generator(check, ctx.generators)


def _wanted(h: HostUse) -> float:
    """The cores the generator's threads wanted: those they used and those they waited for."""
    return h.generator + (h.generator_wait or 0.0)


def _fast_refusals(step: StepJson) -> bool:
    """Whether most of the step's requests were refused (REFUSALS) faster than its answers
    took: requests that come back at once, which a generator sends as fast as it can."""
    by_class = step.get("errors_by_class") or {}
    refused = sum(n for name, n in by_class.items() if name in REFUSALS)
    failed = sum(by_class.values())
    share = (step.get("error_rate") or 0.0) * refused / failed if failed else 0.0
    failed_ms, ok_ms = step.get("error_latency_p50_ms"), step["latency_ms"]["p50"]
    fast = failed_ms is not None and (ok_ms is None or failed_ms <= FAST_ERRORS * ok_ms)
    return fast and share > MOST_REFUSED


def _with_worst_generator(
    check: dict[str, Any], generators: list[dict[str, Any]]
) -> dict[str, Any]:
    """Generators on Ray (run.json `generators`) judge themselves: the busiest for its
    threads stands for them all, saturated when any one was."""
    measured = [g for g in generators if g.get("threads") and g.get("cpu_cores") is not None]
    if not measured:
        return check
    worst = max(measured, key=lambda g: (bool(g.get("saturated")), g["cpu_cores"] / g["threads"]))
    if check["saturated"] and not worst.get("saturated"):
        return check
    return {
        **check,
        "saturated": check["saturated"] or bool(worst.get("saturated")),
        "cpu_cores_max": round(float(worst["cpu_cores"]), 3),
        "threads": int(worst["threads"]),
    }


def load_short(generators: list[dict[str, Any]]) -> str | None:
    """When generators on Ray were lost mid-run: which, why, and that the load was short."""
    lost = [g for g in generators if g.get("lost")]
    if not lost:
        return None
    which = "; ".join(
        f"generator {g['generator']}"
        + (f" on {g.get('host') or g['node'][:12]}" if g.get("node") else "")
        + f": {g.get('reason') or 'lost'}"
        + _kept(g)
        for g in lost
    )
    left = len(generators) - len(lost)
    others = "other generator" if left == 1 else f"other {left} generators"
    return (
        f"The load was short: {len(lost)} of {len(generators)} generators "
        f"{'was' if len(lost) == 1 else 'were'} lost ({which}); the results are what the "
        f"{others} measured, below the plan's load."
    )


def _kept(generator: dict[str, Any]) -> str:
    """What a lost generator's records came to: those copied before it was lost, and
    about how many after its last copy never were."""
    if "unreceived_s" not in generator:
        return ""
    return (
        f"; {generator.get('requests', 0)} of its requests kept, about "
        f"{generator.get('unreceived_estimate', 0)} from its last "
        f"{generator['unreceived_s']:g} s lost"
    )


def _delay_share(h: HostUse, step: StepJson) -> float:
    """The generator's wait for a core per request, as a share of the median latency."""
    latency = step["latency_ms"]["p50"]
    seconds = step.get("duration_s") or 0.0
    sent = step.get("requests") or 0
    rate = sent / seconds if seconds and sent else step["throughput_rps"]
    if not latency or not rate:
        return 0.0
    return (h.generator_wait or 0.0) * 1000 / rate / latency


def _delayed(h: HostUse, step: StepJson, share: float, ctx: Context) -> bool:
    """Whether the generator's waits for a core delayed this step's requests: it waited
    much of the time it wanted a core, and that wait is a good share of each request's
    time, or most of that time no tier saw."""
    if share < STARVED_SHARE or (h.generator_wait or 0.0) < STARVED_CORES:
        return False
    outside = _outside_share(step, ctx)
    delay = _delay_share(h, step)
    if outside is not None:
        # A tier logged these requests: the generator's delays are in what it did not see
        # (a process's threads that wait beside the load, such as samplers', add none).
        delay = min(delay, outside)
    return delay >= STARVED_DELAY or (outside or 0.0) >= OUTSIDE_SHARE


def _outside_share(step: StepJson, ctx: Context) -> float | None:
    """The share of the client's median latency that no tier saw: the time between the
    generator and the first tier (the network, and the generator's own delays); None when
    no tier logged the requests."""
    latency = step["latency_ms"]["p50"]
    entry = step.get("tiers", {}).get(ctx.order[0], {}) if ctx.order else {}
    seen = entry.get("p50_ms")
    # The tier's median counts its failures too, the client's only the answers: comparable
    # only while nearly every request was answered.
    if not latency or seen is None or step.get("error_rate", 0.0) > MOSTLY_ANSWERED:
        return None
    return max(0.0, latency - seen) / latency


def _busy_with_generator(h: HostUse) -> bool:
    busy = h.busy or 0.0
    return busy >= CPU_SATURATED * h.cores and h.generator >= GENERATOR_SHARE * busy


def generator_limits(generator: dict[str, Any]) -> bool:
    """Whether the generator limited the run: at its limit, unless it was busy sending
    requests that were refused at once (a tier's limit, the finding to name)."""
    at_limit = generator["saturated"] or generator["host_saturated"] or generator["starved"]
    return bool(at_limit and not generator.get("refusals"))


def generator_finding(steps: list[StepJson], generator: dict[str, Any], ctx: Context) -> Finding:
    """The run measured its generator: which way, with the numbers."""
    hosts = [host_use(s, ctx) for s in steps]
    top = max(range(len(steps)), key=lambda i: hosts[i].busy or 0.0)
    h, step = hosts[top], steps[top]
    evidence = [
        f"the generator used up to {generator['cpu_cores_max']:.2f} cores on "
        f"{generator['threads']} threads",
        f"the host's CPU was {h.busy or 0.0:.2f} of {ctx.cpu_count} cores busy at {load_text(step)}: "
        f"the stack {h.stack:.2f}, the generator {h.generator:.2f}, other processes "
        f"{h.neighbours:.2f}",
    ]
    if generator["starved"]:
        evidence.append(
            f"the generator's threads waited for a core {100 * generator['cpu_wait_share_max']:.0f}% "
            "of the time they wanted one: its requests went out, and its answers were read, late"
        )
    summary = (
        f"The load generator could not keep up: {_why(generator, h, ctx)}. Every latency "
        "includes its own delay, so these results measure the generator's host, not the "
        f"target. {GENERATOR.advice}"
    )
    onset = steps[0]
    return Finding(
        "generator", GENERATOR, onset["users"], evidence, "the load generator's host", summary,
        rate_of(onset),
    )  # fmt: skip


def _why(generator: dict[str, Any], h: HostUse, ctx: Context) -> str:
    if generator["starved"]:
        return "its threads waited for a CPU"
    if generator["saturated"]:
        used, wanted = generator["cpu_cores_max"], generator.get("cpu_wanted_max", 0.0)
        if wanted > used + 0.05:
            return (
                f"its {generator['threads']} threads wanted {wanted:.2f} cores (they used "
                f"{used:.2f} and waited for a core the rest of the time)"
            )
        return f"it used {used:.2f} cores of {generator['threads']} threads"
    return f"the host it runs on was saturated ({h.busy or 0.0:.2f} of {ctx.cpu_count} cores)"


def generator_headline(finding: Finding) -> str:
    reason = finding.summary.split(". ", 1)[0]
    return f"{reason}: these results measure the generator, not the target."


def _judge_generator(ask: RunAsk) -> Judged | None:
    """The generator that could not keep up decides the run, its headline in place."""
    if not generator_limits(ask.generator):
        return None
    limit = generator_finding(ask.steps, ask.generator, ask.ctx)
    return Judged(limit, 1.0, headline=generator_headline(limit))


# Asked of the whole run first: a generator short of CPU delays every request it measures.
GENERATOR = Cause(
    name="generator",
    resource="cpu",
    scope="run",
    doc=__doc__,
    advice="Run the generator on another host, give it more cores, or load less.",
    saturates="the generator's cores, or its host's",
    reads=("generator.cpu_cores", "generator.cpu_wait_cores", "host.cpu_cores"),
    thresholds=(
        "CPU_SATURATED",
        "FAST_ERRORS",
        "GENERATOR_SATURATED",
        "GENERATOR_SHARE",
        "MOSTLY_ANSWERED",
        "OUTSIDE_SHARE",
        "STARVED_CORES",
        "STARVED_DELAY",
        "STARVED_SHARE",
    ),
    needs_cpu=True,
    judge=_judge_generator,
    computes=True,
    database="statements",
    effect_of_one_at_a_time=True,
)
