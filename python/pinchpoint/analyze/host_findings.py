"""Findings from the host's own gauges while a tier's time grows: a busy disk, memory
pressure, a network link near its speed.

Each needs the gauge high at the heaviest steps and clearly higher than at the lightest:
a disk busy before the load came is not what the load ran into.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinchpoint.analyze.context import Context, load_text, rate_of, resource_of
from pinchpoint.analyze.findings import Finding
from pinchpoint.analyze.thresholds import (
    DISK_SHARE,
    DISK_UTIL,
    DISK_UTIL_RISE,
    IO_PRESSURE,
    IO_PRESSURE_RISE,
    LINK_HOPS,
    LINK_SHARE,
    MEMORY_PRESSURE,
    MEMORY_PRESSURE_RISE,
    NET_UTIL,
    NET_UTIL_RISE,
)
from pinchpoint.analyze.usage import process_group as host_of

HOST = "host"


@dataclass
class Rise:
    """A gauge that reached `level` from `onset` on, peaking at `peak`, from `base`."""

    onset: dict
    peak: float
    peak_step: dict
    base: float


def rise(steps: list[dict], who: str, key: str, level: float, by: float) -> Rise | None:
    """The gauge's rise, when it reaches `level` and gains at least `by` over the run."""
    values = [(s, resource_of(s, who, key)) for s in steps]
    measured = [(s, v) for s, v in values if v is not None]
    if len(measured) < 2:
        return None
    base = measured[0][1]
    peak_step, peak = max(measured, key=lambda m: m[1])
    if peak < level or peak - base < by:
        return None
    onset = next(s for s, v in measured if v >= level)
    return Rise(onset, peak, peak_step, base)


def _pct(share: float) -> str:
    return f"{100 * share:.0f}%"


def disk(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The host's disk is busy, or tasks stall on I/O, as the tier's time grows."""
    limited = disk_limit(tier, steps, ctx)
    if limited is not None:
        return limited
    util = rise(steps, HOST, "disk_util", DISK_UTIL, DISK_UTIL_RISE)
    stall = rise(steps, HOST, "io_pressure", IO_PRESSURE, IO_PRESSURE_RISE)
    seen = util or stall
    if seen is None or not _its_io(tier, seen.peak_step, steps, ctx):
        return None
    evidence = []
    if util is not None:
        evidence.append(
            f"the disk was busy {_pct(util.peak)} of the time at {load_text(util.peak_step)} "
            f"({_pct(util.base)} at {load_text(steps[0])})"
        )
    if stall is not None:
        evidence.append(
            f"some task waited for I/O {_pct(stall.peak)} of the time at "
            f"{load_text(stall.peak_step)} ({_pct(stall.base)} at {load_text(steps[0])})"
        )
    who = host_of(tier, steps, ctx)
    if who is not None:
        written = resource_of(seen.peak_step, who, "disk_write_bytes_s")
        read = resource_of(seen.peak_step, who, "disk_read_bytes_s")
        if written is not None or read is not None:
            evidence.append(
                f"{who}'s processes wrote {(written or 0) / 1e6:.1f} MB/s and read "
                f"{(read or 0) / 1e6:.1f} MB/s at {load_text(seen.peak_step)}"
            )
    summary = (
        f"{tier}'s time grows while the disk saturates from {load_text(seen.onset)}: requests "
        "wait for I/O. Fewer or smaller writes per request (batching, no fsync per request) or "
        "a faster disk will help; more workers or CPU will not."
    )
    return Finding(
        who or tier, "disk", seen.onset["users"], evidence, f"disk I/O, seen in {tier}'s time", summary,
        rate_of(seen.onset),
    )  # fmt: skip


def disk_limit(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The tier's processes read or write at the limit their cgroup allows them (blkio
    throttle, io.max): their disk bytes/s against that limit, as CPU against a quota."""
    who = host_of(tier, steps, ctx)
    if who is None:
        return None
    for way, verb in (("write", "wrote"), ("read", "read")):
        shares = [_limit_share(s, who, way) for s in steps]
        measured = [(s, v) for s, v in zip(steps, shares, strict=True) if v is not None]
        if len(measured) < 2 or measured[-1][1] < DISK_UTIL:
            continue
        onset = next(s for s, v in measured if v >= DISK_UTIL)
        top = measured[-1][0]
        limit = resource_of(top, who, f"disk_{way}_limit_bytes_s") or 0.0
        done = resource_of(top, who, f"disk_{way}_bytes_s") or 0.0
        evidence = [
            f"{who}'s cgroup may {way} {limit / 1e6:.1f} MB/s: its processes {verb} "
            f"{done / 1e6:.1f} MB/s at {load_text(top)}, {_pct(measured[-1][1])} of it "
            f"({_pct(measured[0][1])} at {load_text(steps[0])})",
        ]
        summary = (
            f"{who}'s disk {way}s are held to its cgroup's limit ({limit / 1e6:.1f} MB/s) from "
            f"{load_text(onset)}: requests wait for I/O the limit does not give. Raise the limit, "
            "or write less per request (batching, no fsync per request); more workers or CPU "
            "will not help."
        )
        return Finding(
            who, "disk", onset["users"], evidence, f"{who} disk {way} limit ({limit / 1e6:.1f} MB/s)",
            summary, rate_of(onset),
        )  # fmt: skip
    return None


def _limit_share(step: dict, who: str, way: str) -> float | None:
    limit = resource_of(step, who, f"disk_{way}_limit_bytes_s")
    done = resource_of(step, who, f"disk_{way}_bytes_s")
    return done / limit if limit and done is not None else None


def _its_io(tier: str, step: dict, steps: list[dict], ctx: Context) -> bool:
    """Whether the disk's traffic is the tier's: its processes read or wrote a good share of
    what the host's disks did, where both are known (else another's I/O filled the disk)."""
    who = host_of(tier, steps, ctx)
    host = sum(
        resource_of(step, HOST, k) or 0.0 for k in ("disk_read_bytes_s", "disk_write_bytes_s")
    )
    if who is None or host <= 0:
        return True
    mine = [resource_of(step, who, k) for k in ("disk_read_bytes_s", "disk_write_bytes_s")]
    if all(m is None for m in mine):
        return True
    return sum(m or 0.0 for m in mine) >= DISK_SHARE * host


def memory(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """Tasks stall on memory (reclaim, swapping) as the tier's time grows."""
    stall = rise(steps, HOST, "memory_pressure", MEMORY_PRESSURE, MEMORY_PRESSURE_RISE)
    if stall is None:
        return None
    evidence = [
        f"some task stalled on memory {_pct(stall.peak)} of the time at "
        f"{load_text(stall.peak_step)} ({_pct(stall.base)} at {load_text(steps[0])})"
    ]
    who = host_of(tier, steps, ctx)
    if who is not None:
        rss = resource_of(stall.peak_step, who, "rss_bytes")
        limit = resource_of(stall.peak_step, who, "memory_limit_bytes")
        if rss is not None:
            of = f" of a {limit / 2**20:.0f} MiB cgroup limit" if limit else ""
            evidence.append(
                f"{who}'s processes held {rss / 2**20:.0f} MiB{of} at {load_text(stall.peak_step)}"
            )
    summary = (
        f"{tier}'s time grows while the host runs short of memory from {load_text(stall.onset)}: "
        "the kernel reclaims or swaps while requests wait. Give it more memory (or a higher "
        "cgroup limit) or use less per request."
    )
    return Finding(
        who or tier, "memory", stall.onset["users"], evidence, f"memory pressure, seen in {tier}'s time",
        summary, rate_of(stall.onset),
    )  # fmt: skip


def bandwidth(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The busiest network link (or its shaped rate) runs near its ceiling as the tier's time
    grows: the network path is the component."""
    link = rise(steps, HOST, "net_util", NET_UTIL, NET_UTIL_RISE) or _full_throughout(steps)
    if link is None or not _carries_the_load(link.peak_step):
        return None
    name = _link_name(link.peak_step)
    evidence = [
        f"the network link {name} ran at {_pct(link.peak)} of its ceiling at "
        f"{load_text(link.peak_step)} ({_pct(link.base)} at {load_text(steps[0])})",
        *_link_lines(link.peak_step),
    ]
    summary = (
        f"The network link {name} is full from {load_text(link.onset)}: {tier}'s time grows as "
        "responses wait to be sent. Smaller responses (compression), fewer bytes per request "
        "or a faster link will help; more workers or CPU will not."
    )
    return Finding(
        "network", "bandwidth", link.onset["users"], evidence, f"network link {name}", summary,
        rate_of(link.onset),
    )  # fmt: skip


def _full_throughout(steps: list[dict]) -> Rise | None:
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


def _carries_the_load(step: dict, known: bool = False) -> bool:
    """Whether the link's traffic is the run's: about the bytes the client received, once
    per hop, where both are known."""
    carried = resource_of(step, HOST, "net_link_bytes_s")
    received = step.get("bytes_per_s")
    if carried is None or received is None:
        return not known
    return LINK_SHARE * received <= carried <= LINK_HOPS * received


def _link_name(step: dict) -> str:
    name = step.get("resources", {}).get(HOST, {}).get("net_link")
    return str(name) if name else "(busiest interface)"


def _link_lines(step: dict) -> list[str]:
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


def host_finding(tier: str, steps: list[dict], ctx: Context) -> Finding | None:
    """The first of disk, memory and bandwidth that fires for the tier."""
    return disk(tier, steps, ctx) or memory(tier, steps, ctx) or bandwidth(tier, steps, ctx)
