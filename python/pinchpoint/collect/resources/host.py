"""The host's row of a resource sample: CPU, memory, pressure stalls, run queue, disks and
network.

- Disks: the physical disks only (those of /sys/block with a `device`: not partitions,
  loop, RAM, zram, device-mapper or md devices, whose I/O is already counted on the disks
  under them). Bytes read and written are summed over them; `disk_util` is the busy share
  (time with I/O in flight, `busy_time`) of the busiest one: one saturated disk is a limit
  even when the others idle.
- Network: bytes received and sent over this namespace's non-loopback interfaces together
  (what crosses the wire), the bytes through loopback apart (a stack on one machine talks
  over it), and the link nearest its ceiling, in any network namespace, with its shaper's
  queue (`net_util`, `net_link`, `net_qdisc_*`: see links.py).
- Memory: `rss_bytes` is used memory, `memory_limit_bytes` the physical memory.
- CPU at low priority: `cpu_nice_cores` is the CPU of tasks at a positive nice value (the
  kernel's `nice` time). A process at normal priority takes a core from them as soon as it
  wants one, so what they use is CPU the stack could have had.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from pinchpoint.collect.resources.links import COLUMNS as LINK_COLUMNS
from pinchpoint.collect.resources.links import LinkReader

PRESSURES = ("cpu", "memory", "io")
SYS_BLOCK = Path("/sys/block")


@dataclass(frozen=True)
class Reading:
    """One reader's part of a sample."""

    cpu_s: float  # CPU seconds used since the previous read
    rss: int
    processes: int
    extra: dict[str, Any] = field(default_factory=dict)  # the optional columns


class HostReader:
    """Whole-machine CPU, used memory, pressure stalls, run queue, disks and network."""

    def __init__(
        self,
        proc: Path = Path("/proc"),
        sys_block: Path = SYS_BLOCK,
        links: LinkReader | None = None,
    ) -> None:
        self._cpus = psutil.cpu_count() or 1
        self._busy_s: float | None = None
        self._nice_s: float | None = None
        self._proc = proc
        self._sys_block = sys_block
        self._stalls: dict[str, float] = {}
        self._at = time.monotonic()
        self._disks: dict[str, tuple[int, int, int]] = {}
        self._physical: dict[str, bool] = {}
        self._nics: dict[str, tuple[int, int]] = {}
        stats = _nic_stats()
        flagged = {name for name, s in stats.items() if "loopback" in getattr(s, "flags", "")}
        self._loopback = flagged or {"lo", "lo0"}
        self._links = links if links is not None else LinkReader()

    def read(self) -> Reading:
        """CPU seconds busy (all CPUs) since the previous read, used bytes, CPU count, and
        the other host columns (rates over the time since the previous read)."""
        now = time.monotonic()
        elapsed, self._at = now - self._at, now
        times = psutil.cpu_times()
        busy_s, nice_s = _host_busy_seconds(times), _nice_seconds(times)
        used_s = 0.0 if self._busy_s is None else max(0.0, busy_s - self._busy_s)
        nice = None
        if self._nice_s is not None and elapsed > 0:
            nice = max(0.0, nice_s - self._nice_s) / elapsed
        self._busy_s, self._nice_s = busy_s, nice_s
        memory = psutil.virtual_memory()
        extra: dict[str, Any] = {
            "cpu_nice_cores": nice,
            "run_queue": _run_queue(self._proc / "stat"),
            "memory_limit_bytes": memory.total,
        }
        extra.update(self._pressure(elapsed))
        extra.update(self._disk(elapsed))
        extra.update(self._network(elapsed))
        return Reading(used_s, memory.used, self._cpus, extra)

    def _pressure(self, elapsed: float) -> dict[str, Any]:
        extra = {}
        for kind in PRESSURES:
            stalled = _stall_seconds(self._proc / "pressure" / kind)
            before = self._stalls.get(kind)
            share = None
            if stalled is not None and before is not None and elapsed > 0:
                share = min(1.0, max(0.0, (stalled - before) / elapsed))
            if stalled is not None:
                self._stalls[kind] = stalled
            extra[f"{kind}_pressure"] = share
        return extra

    def _disk(self, elapsed: float) -> dict[str, Any]:
        try:
            counters = psutil.disk_io_counters(perdisk=True) or {}
        except (OSError, RuntimeError, NotImplementedError):
            counters = {}
        now = {
            name: (c.read_bytes, c.write_bytes, getattr(c, "busy_time", -1))
            for name, c in counters.items()
            if self._is_physical(name)
        }
        before, self._disks = self._disks, now
        out: dict[str, Any] = dict.fromkeys(
            ("disk_read_bytes_s", "disk_write_bytes_s", "disk_util")
        )
        if not before or elapsed <= 0:
            return out
        deltas = [(c, before[n]) for n, c in now.items() if n in before]
        out["disk_read_bytes_s"] = sum(max(0, c[0] - b[0]) for c, b in deltas) / elapsed
        out["disk_write_bytes_s"] = sum(max(0, c[1] - b[1]) for c, b in deltas) / elapsed
        busy = [max(0, c[2] - b[2]) / 1000 / elapsed for c, b in deltas if c[2] >= 0 <= b[2]]
        out["disk_util"] = min(1.0, max(busy)) if busy else None
        return out

    def _is_physical(self, name: str) -> bool:
        known = self._physical.get(name)
        if known is None:
            if self._sys_block.is_dir():
                known = (self._sys_block / name / "device").exists()
            else:  # no sysfs: every disk psutil lists
                known = True
            self._physical[name] = known
        return known

    def _network(self, elapsed: float) -> dict[str, Any]:
        try:
            counters = psutil.net_io_counters(pernic=True)
        except (OSError, RuntimeError):
            counters = {}
        now = {name: (c.bytes_recv, c.bytes_sent) for name, c in counters.items()}
        before, self._nics = self._nics, now
        names = ("net_rx_bytes_s", "net_tx_bytes_s", "net_loopback_bytes_s", *LINK_COLUMNS)
        out: dict[str, Any] = dict.fromkeys(names)
        out.update(self._links.read(now, elapsed))
        if not before or elapsed <= 0:
            return out
        rates = {
            name: (
                max(0, c[0] - before[name][0]) / elapsed,
                max(0, c[1] - before[name][1]) / elapsed,
            )
            for name, c in now.items()
            if name in before
        }
        wire = {name: rate for name, rate in rates.items() if name not in self._loopback}
        out["net_rx_bytes_s"] = sum(rx for rx, _ in wire.values())
        out["net_tx_bytes_s"] = sum(tx for _, tx in wire.values())
        # Loopback sends what it receives: its bytes sent are the traffic through it.
        out["net_loopback_bytes_s"] = sum(rates[n][1] for n in self._loopback if n in rates)
        return out


def _nic_stats() -> dict[str, Any]:
    try:
        return psutil.net_if_stats()
    except (OSError, RuntimeError):
        return {}


def _stall_seconds(path: Path) -> float | None:
    """The total seconds in which some task stalled, from a /proc/pressure file; None when
    the kernel keeps no pressure information."""
    try:
        first = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(part.split("=", 1) for part in first.split()[1:] if "=" in part)
    total = fields.get("total")
    return int(total) / 1e6 if first.startswith("some ") and total and total.isdigit() else None


def _run_queue(path: Path) -> int | None:
    """Runnable tasks right now (procs_running of /proc/stat), the sampler itself excluded."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("procs_running "):
                return max(0, int(line.split()[1]) - 1)
    except (OSError, ValueError):
        return None
    return None


def _host_busy_seconds(times: Any) -> float:
    # On Linux guest time is already counted in user and nice.
    counted_twice = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - counted_twice - idle


def _nice_seconds(times: Any) -> float:
    """CPU seconds of tasks at a positive nice value (a niced guest's counted once)."""
    return float(getattr(times, "nice", 0.0)) - float(getattr(times, "guest_nice", 0.0))
