"""A busy disk, or a cgroup's disk limit, while the tier's time grows."""

from __future__ import annotations

from pinchpoint.analyze.causes.cause import Ask, Cause, Finding
from pinchpoint.analyze.causes.gauges import HOST, pct, rise
from pinchpoint.analyze.context import Context, load_text, rate_of, resource_of
from pinchpoint.analyze.thresholds import (
    DISK_SHARE,
    DISK_UTIL,
    DISK_UTIL_RISE,
    IO_PRESSURE,
    IO_PRESSURE_RISE,
)
from pinchpoint.analyze.usage import process_group as host_of
from pinchpoint.rundir.shapes import StepJson


def disk(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
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
            f"the disk was busy {pct(util.peak)} of the time at {load_text(util.peak_step)} "
            f"({pct(util.base)} at {load_text(steps[0])})"
        )
    if stall is not None:
        evidence.append(
            f"some task waited for I/O {pct(stall.peak)} of the time at "
            f"{load_text(stall.peak_step)} ({pct(stall.base)} at {load_text(steps[0])})"
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
        who or tier, DISK, seen.onset["users"], evidence, f"disk I/O, seen in {tier}'s time", summary,
        rate_of(seen.onset),
    )  # fmt: skip


def disk_limit(tier: str, steps: list[StepJson], ctx: Context) -> Finding | None:
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
            f"{done / 1e6:.1f} MB/s at {load_text(top)}, {pct(measured[-1][1])} of it "
            f"({pct(measured[0][1])} at {load_text(steps[0])})",
        ]
        summary = (
            f"{who}'s disk {way}s are held to its cgroup's limit ({limit / 1e6:.1f} MB/s) from "
            f"{load_text(onset)}: requests wait for I/O the limit does not give. Raise the limit, "
            "or write less per request (batching, no fsync per request); more workers or CPU "
            "will not help."
        )
        return Finding(
            who, DISK, onset["users"], evidence, f"{who} disk {way} limit ({limit / 1e6:.1f} MB/s)",
            summary, rate_of(onset),
        )  # fmt: skip
    return None


def _limit_share(step: StepJson, who: str, way: str) -> float | None:
    limit = resource_of(step, who, f"disk_{way}_limit_bytes_s")
    done = resource_of(step, who, f"disk_{way}_bytes_s")
    return done / limit if limit and done is not None else None


def _its_io(tier: str, step: StepJson, steps: list[StepJson], ctx: Context) -> bool:
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


def _find_disk(ask: Ask) -> Finding | None:
    return disk(ask.tier, ask.steps, ask.ctx)


DISK = Cause(
    name="disk",
    resource="disk",
    scope="tier",
    doc=__doc__,
    advice=(
        "Fewer or smaller writes per request (batching, no fsync per request), a faster disk "
        "or a higher cgroup limit; more workers or CPU will not help."
    ),
    saturates="a disk, or a cgroup's disk limit",
    reads=(
        "host.disk_util",
        "host.io_pressure",
        "resources.disk_write_bytes_s",
        "resources.disk_write_limit_bytes_s",
        "resources.disk_read_limit_bytes_s",
        "resources.disk_read_bytes_s",
    ),
    thresholds=("DISK_SHARE", "DISK_UTIL", "DISK_UTIL_RISE", "IO_PRESSURE", "IO_PRESSURE_RISE"),
    needs_cpu=False,
    find=_find_disk,
)
