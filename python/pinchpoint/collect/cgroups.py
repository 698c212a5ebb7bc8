"""The CPU quota of the cgroup a process runs in, and how often the kernel throttled it.

Both cgroup versions:

- v1: the `cpu` controller's hierarchy; quota in `cpu.cfs_quota_us` (-1: none) per
  `cpu.cfs_period_us`; `cpu.stat` has `nr_periods`, `nr_throttled`, `throttled_time` (ns);
- v2: the unified hierarchy; quota in `cpu.max` (`max 100000`: none, `20000 100000`:
  a fifth of a core); `cpu.stat` has `nr_periods`, `nr_throttled`, `throttled_usec`.

A process is limited by the nearest cgroup, itself or an ancestor, that has a quota.
Paths in /proc/<pid>/cgroup are taken relative to the root of the mount (mountinfo), so
a container that sees only its own part of the hierarchy is read right too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


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


def cpu_mounts(mountinfo: str) -> list[Mount]:
    """The cgroup v1 mounts with the cpu controller and the cgroup2 mounts, from mountinfo text."""
    found = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 10:
            continue
        dash = fields.index("-")
        fstype, options = fields[dash + 1], fields[dash + 3].split(",")
        root, point = fields[3], Path(_unescape(fields[4]))
        if fstype == "cgroup" and "cpu" in options:
            found.append(Mount(1, root, point))
        elif fstype == "cgroup2":
            found.append(Mount(2, root, point))
    return found


def process_cgroups(text: str) -> dict[int, str]:
    """From /proc/<pid>/cgroup text: {1: path in the v1 cpu hierarchy, 2: path in v2}."""
    paths: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            paths.setdefault(2, path)
        elif "cpu" in controllers.split(","):
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
        limit, period = (folder / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if limit == "max" or int(period) <= 0:
        return None
    return int(limit) / int(period)


def limiting_cgroup(pid: int, mounts: list[Mount]) -> CpuCgroup | None:
    """The nearest cgroup, the process's own or an ancestor, with a CPU quota; None if none."""
    try:
        paths = process_cgroups((PROC / str(pid) / "cgroup").read_text())
    except OSError:
        return None
    for mount in sorted(mounts, key=lambda m: m.version):
        path = paths.get(mount.version)
        folder = _folder(mount, path) if path is not None else None
        while folder is not None:
            quota = quota_of(folder, mount.version)
            if quota is not None:
                return CpuCgroup(folder, mount.version, quota)
            folder = folder.parent if folder != mount.point else None
    return None


def read_mounts() -> list[Mount]:
    """This machine's cpu cgroup mounts ([] when /proc cannot tell)."""
    try:
        return cpu_mounts((PROC / "self" / "mountinfo").read_text())
    except OSError:
        return []


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


def _integer(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _unescape(text: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        text = text.replace(code, char)
    return text
