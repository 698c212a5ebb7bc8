"""A throwaway cgroup with a CPU quota, to put a stack's processes under a CPU limit.

    with CpuQuota(cores=0.5) as quota:
        quota.add(pids)  # they and the children they fork from now on share half a core
        ...
    # processes still in it are moved back to the parent, and the cgroup is removed

cgroup v1 (the `cpu` controller's hierarchy: cpu.cfs_quota_us / cpu.cfs_period_us) and v2
(`cpu.max`; the `cpu` controller is enabled in the root's subtree_control when it is not).
The cgroup is made at the root of the hierarchy. Needs root. `ThrowawayCgroup` is what
any such limit shares (see blkio.py for the disk's).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path

from pinchpoint.collect.resources.cgroups import Mount, read_mounts
from pinchpoint.demo.errors import StackError
from pinchpoint.lifecycle import Started

PERIOD_US = 100_000
_RMDIR_TRIES = 50


def hierarchy(v1: str, v2: str, mounts: list[Mount] | None = None) -> Mount | None:
    """Where a cgroup under a controller can be made: the v1 hierarchy of controller `v1`,
    else a v2 one that offers controller `v2`; None if neither is mounted."""
    mounts = read_mounts(v1) if mounts is None else mounts
    for mount in sorted(mounts, key=lambda m: m.version):
        if mount.version == 1:
            return mount
        controllers = _read(mount.point / "cgroup.controllers") or ""
        if v2 in controllers.split():
            return mount
    return None


def cpu_hierarchy(mounts: list[Mount] | None = None) -> Mount | None:
    """Where a cgroup with a CPU quota can be made: the v1 cpu hierarchy, else a v2 one
    that offers the cpu controller; None if neither is mounted."""
    return hierarchy("cpu", "cpu", mounts)


class ThrowawayCgroup(Started):
    """A child cgroup of a hierarchy's root with a limit, removed on exit. Subclasses say
    which controller (`v1`, `v2`), what the limit is (`describe`) and write it (`write`)."""

    v1 = ""
    v2 = ""

    def __init__(self, mount: Mount | None = None) -> None:
        self.mount = mount
        self.path: Path | None = None
        self._enabled = False

    @property
    def version(self) -> int:
        assert self.mount is not None
        return self.mount.version

    def start(self) -> None:
        """Makes the cgroup and sets its limit (`create`)."""
        self.create()

    def stop(self) -> None:
        """Removes the cgroup (`remove`)."""
        self.remove()

    def describe(self) -> str:
        raise NotImplementedError

    def write(self, path: Path) -> None:
        raise NotImplementedError

    def create(self) -> Path:
        """Makes the cgroup and sets its limit; StackError when the machine does not allow it."""
        self.mount = self.mount or hierarchy(self.v1, self.v2)
        if self.mount is None:
            raise StackError(f"no cgroup hierarchy with the {self.v1} controller is mounted")
        path = self.mount.point / f"pinchpoint-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            if self.mount.version == 2:
                self._enable_controller()
            path.mkdir()
            self.path = path
            self.write(path)
        except OSError as e:
            self.remove()
            raise StackError(
                f"could not make a cgroup with {self.describe()} at {path}: {e}"
            ) from e
        return path

    def add(self, pids: Iterable[int]) -> None:
        """Moves processes (each with all its threads) into the cgroup."""
        assert self.path is not None, "create() first"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        text = _read(self.path / "cgroup.procs") or ""
        return [int(line) for line in text.split()]

    def remove(self) -> None:
        """Moves what is left in the cgroup to its parent and removes it; idempotent."""
        path, self.path = self.path, None
        try:
            if path is not None and path.exists():
                _empty_and_remove(path)
        finally:
            if self._enabled and self.mount is not None:
                self._enabled = False
                with contextlib.suppress(OSError):
                    (self.mount.point / "cgroup.subtree_control").write_text(f"-{self.v2}\n")

    def _enable_controller(self) -> None:
        assert self.mount is not None
        control = self.mount.point / "cgroup.subtree_control"
        if self.v2 not in (_read(control) or "").split():
            control.write_text(f"+{self.v2}\n")
            self._enabled = True


class CpuQuota(ThrowawayCgroup):
    """A child cgroup of the hierarchy's root holding its processes to `cores` CPUs."""

    v1 = v2 = "cpu"

    def __init__(self, cores: float, mount: Mount | None = None) -> None:
        if cores <= 0:
            raise ValueError(f"cores must be positive, got {cores}")
        super().__init__(mount)
        self.cores = cores

    def describe(self) -> str:
        return "a CPU quota"

    def write(self, path: Path) -> None:
        quota = max(1000, round(self.cores * PERIOD_US))
        if self.version == 1:
            (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        else:
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")


def _empty_and_remove(path: Path) -> None:
    for tries in range(_RMDIR_TRIES):
        for pid in (_read(path / "cgroup.procs") or "").split():
            with contextlib.suppress(OSError):
                (path.parent / "cgroup.procs").write_text(f"{pid}\n")
        try:
            path.rmdir()
            return
        except OSError:
            # A process that is exiting still counts until it is reaped.
            if tries == _RMDIR_TRIES - 1:
                raise
            time.sleep(0.1)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
