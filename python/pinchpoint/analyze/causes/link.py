"""A network link (or its shaped rate) near its ceiling while the tier's time grows."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.gauges import HOST, Rise, pct, rise
from pinchpoint.analyze.context import Context, load_text, rate_of, resource_of
from pinchpoint.analyze.thresholds import LINK_HOPS, LINK_SHARE, NET_UTIL, NET_UTIL_RISE
from pinchpoint.rundir.shapes import StepJson


def bandwidth(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
    """The busiest network link (or its shaped rate) runs near its ceiling as the tier's time
    grows: the network path is the component."""
    link = rise(steps, HOST, "net_util", NET_UTIL, NET_UTIL_RISE) or _full_throughout(steps)
    if link is None or not _carries_the_load(link.peak_step):
        return None
    name = _link_name(link.peak_step)
    evidence = [
        f"the network link {name} ran at {pct(link.peak)} of its ceiling at "
        f"{load_text(link.peak_step)} ({pct(link.base)} at {load_text(steps[0])})",
        *_link_lines(link.peak_step),
    ]
    summary = (
        f"The network link {name} is full from {load_text(link.onset)}: {tier}'s time grows as "
        f"responses wait to be sent. {LINK.advice}"
    )
    return Finding(
        "network", LINK, link.onset["users"], evidence, f"network link {name}", summary,
        rate_of(link.onset),
    )  # fmt: skip


def _full_throughout(steps: list[StepJson]) -> Rise | None:
    """A link full from some step on, at every heavier step, carrying the run's own bytes at
    each (so its traffic is the load's, not another's): already near full at the lightest
    step, it shows no rise, but it is the ceiling all the same."""
    measured = [(s, v) for s in steps if (v := resource_of(s, HOST, "net_util")) is not None]
    first = next((i for i, (_, v) in enumerate(measured) if v >= NET_UTIL), None)
    if len(measured) < 2 or first is None or first == len(measured) - 1:
        return None
    full = measured[first:]
    if min(v for _, v in full) < NET_UTIL:
        return None
    if not all(_carries_the_load(s, known=True) for s, _ in measured):
        return None
    peak_step, peak = max(full, key=lambda m: m[1])
    return Rise(full[0][0], peak, peak_step, measured[0][1])


def _carries_the_load(step: StepJson, known: bool = False) -> bool:
    """Whether the link's traffic is the run's: about the bytes the client received, once
    per hop, where both are known."""
    carried = resource_of(step, HOST, "net_link_bytes_s")
    received = step.get("bytes_per_s")
    if carried is None or received is None:
        return not known
    return LINK_SHARE * received <= carried <= LINK_HOPS * received


def _link_name(step: StepJson) -> str:
    name = step.get("resources", {}).get(HOST, {}).get("net_link")
    return str(name) if name else "(busiest interface)"


def _link_lines(step: StepJson) -> list[str]:
    at = load_text(step)
    carried = resource_of(step, HOST, "net_link_bytes_s")
    limit = resource_of(step, HOST, "net_link_limit_bytes_s")
    lines = []
    if carried is not None and limit:
        lines.append(
            f"it carried {carried * 8 / 1e6:.1f} Mbit/s against a ceiling of "
            f"{limit * 8 / 1e6:.1f} Mbit/s at {at}"
        )
    else:
        sent = resource_of(step, HOST, "net_tx_bytes_s") or 0.0
        received = resource_of(step, HOST, "net_rx_bytes_s") or 0.0
        lines.append(
            f"the host sent {sent * 8 / 1e6:.0f} Mbit/s and received "
            f"{received * 8 / 1e6:.0f} Mbit/s at {at}"
        )
    drops = resource_of(step, HOST, "net_qdisc_drops_s")
    backlog = resource_of(step, HOST, "net_qdisc_backlog_bytes")
    if backlog:
        lines.append(f"the link's queue held {backlog / 1e3:.0f} kB waiting to be sent at {at}")
    if drops:
        lines.append(f"it dropped {drops:.0f} packets/s at {at}")
    return lines


def _find_link(ask: Ask) -> Finding | None:
    return bandwidth(ask.tier, ask.steps, ask.ctx)


LINK = Cause(
    name="link",
    resource="bandwidth",
    scope="tier",
    doc=__doc__,
    advice=(
        "Smaller responses (compression), fewer bytes per request or a faster link will "
        "help; more workers or CPU will not."
    ),
    saturates="a network link's rate",
    reads=("host.net_util", "host.net_link_bytes_s", "bytes_per_s"),
    thresholds=("LINK_HOPS", "LINK_SHARE", "NET_UTIL", "NET_UTIL_RISE"),
    needs_cpu=False,
    find=_find_link,
)
