"""A throwaway cgroup that holds its processes' disk writes (and reads) to a rate, to give
a stack a disk with a known ceiling.

    with DiskLimit(write_bytes_s=1 << 20, device=str(workdir)) as limit:
        limit.add(pids)  # their writes to workdir's disk, and their children's: 1 MiB/s
        ...
    # processes still in it are moved back to the parent, and the cgroup is removed

cgroup v1: the `blkio` hierarchy, `blkio.throttle.write_bps_device` (and `read_bps_device`)
with the disk's `major:minor`; v2: `io.max` (`major:minor wbps=... rbps=...`; the `io`
controller is enabled in the root's subtree_control when it is not). The limit applies to
the whole disk, not to a partition, so a partition is resolved to its disk.

What it throttles is the I/O the processes submit themselves: direct I/O and what fsync
writes out. Pages merely dirtied may be written back later by the kernel's flusher, in v1
outside the cgroup's limit; a writer that fsyncs each write is held to the rate.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from pinchpoint.collect.resources.cgroups import PROC, Mount, unescape_mount_path
from pinchpoint.demo.errors import StackError
from pinchpoint_lab.cgroup import ThrowawayCgroup, hierarchy

SYS_BLOCK = Path("/sys/dev/block")
_MAJOR_MINOR = re.compile(r"\d+:\d+")


def io_hierarchy(mounts: list[Mount] | None = None) -> Mount | None:
    """Where a cgroup with a disk limit can be made: the v1 blkio hierarchy, else a v2 one
    that offers the io controller; None if neither is mounted."""
    return hierarchy("blkio", "io", mounts)


def block_device(where: str | None = None) -> str:
    """The `major:minor` of the disk a limit must name to hold I/O to `where`: a file or
    folder (the disk its filesystem is on), a block device node, or a `major:minor`
    already; None: the temporary folder's (where the demo stacks' workdirs are made).
    StackError when no disk holds it (e.g. tmpfs)."""
    where = tempfile.gettempdir() if where is None else where
    if _MAJOR_MINOR.fullmatch(where):
        number = where
    else:
        try:
            st = os.stat(where)
        except OSError as e:
            raise StackError(f"cannot find the disk of {where}: {e}") from e
        dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
        if os.major(dev) == 0:
            dev = _mount_source(where)
        number = f"{os.major(dev)}:{os.minor(dev)}"
    return _whole_disk(number, where)


class DiskLimit(ThrowawayCgroup):
    """A child cgroup of the io hierarchy's root holding its processes' writes to the disk
    of `device` (see block_device) to write_bytes_s bytes per second, and their reads to
    read_bytes_s when given."""

    v1 = "blkio"
    v2 = "io"

    def __init__(
        self,
        write_bytes_s: int,
        device: str | None = None,
        *,
        read_bytes_s: int | None = None,
        mount: Mount | None = None,
    ) -> None:
        for name, rate in (("write_bytes_s", write_bytes_s), ("read_bytes_s", read_bytes_s)):
            if rate is not None and rate <= 0:
                raise ValueError(f"{name} must be positive, got {rate}")
        super().__init__(mount)
        self.write_bytes_s = write_bytes_s
        self.read_bytes_s = read_bytes_s
        self.device = block_device(device)

    def describe(self) -> str:
        return f"a disk limit on {self.device}"

    def write(self, path: Path) -> None:
        rates = {"write": self.write_bytes_s, "read": self.read_bytes_s}
        if self.version == 1:
            for way, rate in rates.items():
                if rate is not None:
                    (path / f"blkio.throttle.{way}_bps_device").write_text(
                        f"{self.device} {rate}\n"
                    )
        else:
            keys = " ".join(f"{way[0]}bps={rate}" for way, rate in rates.items() if rate)
            (path / "io.max").write_text(f"{self.device} {keys}\n")


def _mount_source(where: str) -> int:
    """The device number of the block device a filesystem with an anonymous device number
    (btrfs, say) was mounted from, by the deepest mount holding `where`."""
    real = os.path.realpath(where)
    best: tuple[int, str] | None = None
    try:
        lines = (PROC / "self" / "mountinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if "-" not in fields:
            continue
        point, source = unescape_mount_path(fields[4]), fields[fields.index("-") + 2]
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), source)
    if best is not None and best[1].startswith("/"):
        try:
            st = os.stat(best[1])
        except OSError:
            pass
        else:
            if stat.S_ISBLK(st.st_mode):
                return st.st_rdev
    raise StackError(f"no block device holds {where}: a disk limit cannot apply to it")


def _whole_disk(number: str, where: str) -> str:
    """The disk of a partition (its parent in sysfs); a disk itself as it is."""
    entry = SYS_BLOCK / number
    if not entry.exists():
        raise StackError(f"{where}: {number} is not a block device this machine has")
    if (entry / "partition").exists():
        return (entry.resolve().parent / "dev").read_text().strip()
    return number
