"""The CPU quota of the cgroup a process runs in, how often the kernel throttled it, its
memory limit and the rates its disk I/O is throttled to. Only read, never written.

Both cgroup versions:

- v1: the `cpu` controller's hierarchy; quota in `cpu.cfs_quota_us` (-1: none) per
  `cpu.cfs_period_us`; `cpu.stat` has `nr_periods`, `nr_throttled`, `throttled_time` (ns);
  the `memory` controller's hierarchy: `memory.limit_in_bytes` (a huge number: none);
  the `blkio` controller's: `blkio.throttle.read_bps_device` and `write_bps_device`, a
  `major:minor bytes_per_second` line per throttled disk (empty: none);
- v2: the unified hierarchy; quota in `cpu.max` (`max 100000`: none, `20000 100000`:
  a fifth of a core); `cpu.stat` has `nr_periods`, `nr_throttled`, `throttled_usec`;
  `memory.max` (`max`: none); `io.max`, a line per throttled disk
  (`8:16 rbps=2097152 wbps=max riops=max wiops=120`).

A process is limited by the nearest cgroup, itself or an ancestor, that has a quota; its
memory by the lowest limit of its cgroup and the ancestors; its disk I/O, per disk, by the
lowest rate of its cgroup and the ancestors in v2, but in v1 by its own cgroup's alone (v1
throttling is flat: a parent's rate does not hold its children).
Paths in /proc/<pid>/cgroup are taken relative to the root of the mount (mountinfo), so
a container that sees only its own part of the hierarchy is read right too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
# cgroup v1 writes "no limit" as the largest page-aligned counter (about 2**63).
_V1_NO_LIMIT = 2**62


@dataclass(frozen=True)
class Mount:
    """Where a cgroup hierarchy is mounted: version 1 (the cpu controller) or 2."""

    version: int
    root: str  # the hierarchy's path that the mount point shows
    point: Path


@dataclass(frozen=True)
class Throttling:
    """Counters of a cgroup's cpu.stat: CFS periods, throttled periods, throttled seconds."""

    periods: int
    throttled: int
    throttled_s: float


@dataclass(frozen=True)
class CpuCgroup:
    """A cgroup folder with a CPU quota."""

    path: Path
    version: int
    quota_cores: float

    def throttling(self) -> Throttling | None:
        """The cgroup's counters now, or None when cpu.stat cannot be read."""
        stat = _key_values(self.path / "cpu.stat")
        if stat is None or "nr_periods" not in stat:
            return None
        if "throttled_usec" in stat:
            throttled_s = stat["throttled_usec"] / 1e6
        else:
            throttled_s = stat.get("throttled_time", 0) / 1e9
        return Throttling(stat["nr_periods"], stat.get("nr_throttled", 0), throttled_s)


@dataclass(frozen=True)
class MemoryCgroup:
    """The cgroup folder whose memory limit holds a process: the lowest on its path."""

    path: Path
    version: int
    limit_bytes: int


@dataclass(frozen=True)
class DiskRate:
    """A rate a cgroup folder throttles one disk's reads or writes to."""

    device: str  # major:minor
    path: Path
    bytes_s: int


@dataclass(frozen=True)
class DiskCgroups:
    """The rates that hold a process's disk reads and writes, one per throttled disk."""

    read: tuple[DiskRate, ...]
    write: tuple[DiskRate, ...]


_Found = tuple[CpuCgroup | None, MemoryCgroup | None, DiskCgroups | None]


class CgroupReader:
    """The CPU quota, memory limit and disk rates of components' processes, for the
    resource sampler. Processes are seldom moved and limits seldom changed: a process's
    cgroups and their limits are looked up when it is first seen and again every
    `refresh_s`, once for every component; the throttling counters at every read. The
    blkio mounts are this machine's unless given."""

    def __init__(
        self,
        cpu: list[Mount],
        memory: list[Mount],
        refresh_s: float = 1.0,
        blkio: list[Mount] | None = None,
    ) -> None:
        self._cpu, self._memory = cpu, memory
        self._blkio = read_mounts("blkio") if blkio is None else blkio
        self._refresh_s = refresh_s
        self._looked_up: float | None = None
        self._groups: dict[int, _Found] = {}
        self._resolved: dict[str, _Found] = {}

    def new_sample(self) -> None:
        """Starts a sample: every refresh_s, forgets the cgroups and limits looked up."""
        now = time.monotonic()
        if self._looked_up is None or now - self._looked_up >= self._refresh_s:
            self._groups, self._resolved = {}, {}
            self._looked_up = now

    def read(self, pids: Iterable[int], last: dict[Path, Throttling]) -> dict[str, Any]:
        """The quota, memory-limit and disk-limit columns of one component's processes
        (None where none applies): the sum over their distinct cgroups (and disks). `last`
        holds the component's throttling counters at the previous read, and is updated in
        place."""
        cpu: dict[Path, CpuCgroup] = {}
        memory: dict[Path, int] = {}
        disk_read: dict[tuple[str, Path], int] = {}
        disk_write: dict[tuple[str, Path], int] = {}
        for pid in pids if self._cpu or self._memory or self._blkio else ():
            quota, limit, disk = self._lookup(pid)
            if quota is not None:
                cpu[quota.path] = quota
            if limit is not None:
                memory[limit.path] = limit.limit_bytes
            if disk is not None:
                disk_read.update(((r.device, r.path), r.bytes_s) for r in disk.read)
                disk_write.update(((r.device, r.path), r.bytes_s) for r in disk.write)
        out: dict[str, Any] = {
            "memory_limit_bytes": sum(memory.values()) if memory else None,
            "disk_read_limit_bytes_s": sum(disk_read.values()) if disk_read else None,
            "disk_write_limit_bytes_s": sum(disk_write.values()) if disk_write else None,
        }
        now = {path: t for path, g in cpu.items() if (t := g.throttling()) is not None}
        before = dict(last)
        last.clear()
        last.update(now)
        if not now:
            names = ("cpu_quota_cores", "cpu_periods", "cpu_throttled", "cpu_throttled_s")
            return out | dict.fromkeys(names)
        deltas = [(t, before.get(path, t)) for path, t in now.items()]
        return out | {
            "cpu_quota_cores": sum(cpu[path].quota_cores for path in now),
            "cpu_periods": sum(t.periods - b.periods for t, b in deltas),
            "cpu_throttled": sum(t.throttled - b.throttled for t, b in deltas),
            "cpu_throttled_s": sum(t.throttled_s - b.throttled_s for t, b in deltas),
        }

    def _lookup(self, pid: int) -> _Found:
        found = self._groups.get(pid)
        if found is not None:
            return found
        try:
            with open(f"{PROC}/{pid}/cgroup") as f:
                text = f.read()
        except OSError:
            return None, None, None
        found = self._resolved.get(text)
        if found is None:
            found = (
                cpu_cgroup_of(process_cgroups(text), self._cpu),
                memory_cgroup_of(process_cgroups(text, "memory"), self._memory),
                disk_cgroups_of(process_cgroups(text, "blkio"), self._blkio),
            )
            self._resolved[text] = found
        self._groups[pid] = found
        return found


def cpu_mounts(mountinfo: str, controller: str = "cpu") -> list[Mount]:
    """The cgroup v1 mounts with the cpu (or another) controller and the cgroup2 mounts,
    from mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        dash = fields.index("-")
        fstype, options = fields[dash + 1], fields[dash + 3].split(",")
        root, point = fields[3], Path(unescape_mount_path(fields[4]))
        if fstype == "cgroup" and controller in options:
            found.append(Mount(1, root, point))
        elif fstype == "cgroup2":
            found.append(Mount(2, root, point))
    return found


def process_cgroups(text: str, controller: str = "cpu") -> dict[int, str]:
    """From /proc/<pid>/cgroup text: {1: path in the v1 cpu (or another controller's)
    hierarchy, 2: path in v2}."""
    paths: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            paths.setdefault(2, path)
        elif controller in controllers.split(","):
            paths.setdefault(1, path)
    return paths


def quota_of(folder: Path, version: int) -> float | None:
    """The CPU quota of one cgroup folder, in cores, or None when it has none."""
    if version == 1:
        quota = _integer(folder / "cpu.cfs_quota_us")
        period = _integer(folder / "cpu.cfs_period_us")
        if quota is None or period is None or quota < 0 or period <= 0:
            return None
        return quota / period
    try:
        limit, period_text = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if limit == "max" or int(period_text) <= 0:
        return None
    return int(limit) / int(period_text)


def memory_limit_of(folder: Path, version: int) -> int | None:
    """The memory limit of one cgroup folder, in bytes, or None when it has none."""
    name = "memory.limit_in_bytes" if version == 1 else "memory.max"
    try:
        text = (folder / name).read_text().strip()
    except OSError:
        return None
    if not text.isdigit() or (version == 1 and int(text) >= _V1_NO_LIMIT):
        return None
    return int(text)


def disk_rates_of(folder: Path, version: int) -> tuple[dict[str, int], dict[str, int]]:
    """The rates one cgroup folder throttles disks' reads and writes to, in bytes per
    second, by `major:minor` ({} where it sets none)."""
    read: dict[str, int] = {}
    write: dict[str, int] = {}
    if version == 1:
        for rates, name in ((read, "read"), (write, "write")):
            for line in (_text(folder / f"blkio.throttle.{name}_bps_device") or "").splitlines():
                device, _, rate = line.partition(" ")
                if rate.strip().isdigit() and int(rate) > 0:
                    rates[device] = int(rate)
        return read, write
    for line in (_text(folder / "io.max") or "").splitlines():
        device, *keys = line.split()
        for key, _, rate in (k.partition("=") for k in keys):
            if key in ("rbps", "wbps") and rate.isdigit() and int(rate) > 0:
                (read if key == "rbps" else write)[device] = int(rate)
    return read, write


def disk_cgroups_of(paths: dict[int, str], mounts: list[Mount]) -> DiskCgroups | None:
    """The rates that hold a process's disk reads and writes, from the paths
    process_cgroups gave for the blkio controller: per disk, the lowest in v2 on the path
    from its cgroup to the root, in v1 its own cgroup's; None when no disk is throttled."""
    read: dict[str, DiskRate] = {}
    write: dict[str, DiskRate] = {}
    seen: set[Mount] = set()
    for mount, folder in _ancestors(paths, mounts):
        if mount.version == 1 and mount in seen:
            continue  # v1 throttling is flat: an ancestor's rate does not hold a child
        seen.add(mount)
        for found, rates in zip((read, write), disk_rates_of(folder, mount.version), strict=True):
            for device, rate in rates.items():
                if device not in found or rate < found[device].bytes_s:
                    found[device] = DiskRate(device, folder, rate)
    if not read and not write:
        return None
    return DiskCgroups(tuple(read.values()), tuple(write.values()))


def limiting_cgroup(pid: int, mounts: list[Mount]) -> CpuCgroup | None:
    """The nearest cgroup, the process's own or an ancestor, with a CPU quota; None if none."""
    try:
        return cpu_cgroup_of(process_cgroups((PROC / str(pid) / "cgroup").read_text()), mounts)
    except OSError:
        return None


def cpu_cgroup_of(paths: dict[int, str], mounts: list[Mount]) -> CpuCgroup | None:
    """As limiting_cgroup, from the paths process_cgroups gave."""
    for mount, folder in _ancestors(paths, mounts):
        quota = quota_of(folder, mount.version)
        if quota is not None:
            return CpuCgroup(folder, mount.version, quota)
    return None


def memory_cgroup_of(paths: dict[int, str], mounts: list[Mount]) -> MemoryCgroup | None:
    """The cgroup on the process's path, in mounts of the memory controller, with the
    lowest memory limit; None when none has a limit."""
    found = None
    for mount, folder in _ancestors(paths, mounts):
        limit = memory_limit_of(folder, mount.version)
        if limit is not None and (found is None or limit < found.limit_bytes):
            found = MemoryCgroup(folder, mount.version, limit)
    return found


def read_mounts(controller: str = "cpu") -> list[Mount]:
    """This machine's cpu (or another controller's) cgroup mounts ([] when /proc cannot tell)."""
    try:
        return cpu_mounts((PROC / "self" / "mountinfo").read_text(), controller)
    except OSError:
        return []


def _ancestors(paths: dict[int, str], mounts: list[Mount]) -> Iterator[tuple[Mount, Path]]:
    """The folders of a process's cgroup and its ancestors, nearest first, v1 before v2."""
    for mount in sorted(mounts, key=lambda m: m.version):
        path = paths.get(mount.version)
        folder = _folder(mount, path) if path is not None else None
        while folder is not None:
            yield mount, folder
            folder = folder.parent if folder != mount.point else None


def _folder(mount: Mount, path: str) -> Path | None:
    root = mount.root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None  # the process's cgroup is outside what this mount shows
    folder = mount.point / path[len(root) :].lstrip("/")
    return folder if folder.is_dir() else None


def _key_values(path: Path) -> dict[str, int] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _integer(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def unescape_mount_path(text: str) -> str:
    """A path as mountinfo writes it (space, tab, newline and backslash as octal escapes),
    the escapes undone."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text
