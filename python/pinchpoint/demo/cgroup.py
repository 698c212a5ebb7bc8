"""A throwaway cgroup with a CPU quota, to put a stack's processes under a CPU limit.

    with CpuQuota(cores=0.5) as quota:
        quota.add(pids)  # they and the children they fork from now on share half a core
        ...
    # processes still in it are moved back to the parent, and the cgroup is removed

cgroup v1 (the `cpu` controller's hierarchy: cpu.cfs_quota_us / cpu.cfs_period_us) and v2
(`cpu.max`; the `cpu` controller is enabled in the root's subtree_control when it is not).
The cgroup is made at the root of the hierarchy. Needs root.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Self

from pinchpoint.collect.cgroups import Mount, read_mounts
from pinchpoint.demo.errors import StackError

PERIOD_US = 100_000
_RMDIR_TRIES = 50


def cpu_hierarchy(mounts: list[Mount] | None = None) -> Mount | None:
    """Where a cgroup with a CPU quota can be made: the v1 cpu hierarchy, else a v2 one
    that offers the cpu controller; None if neither is mounted."""
    mounts = read_mounts() if mounts is None else mounts
    for mount in sorted(mounts, key=lambda m: m.version):
        if mount.version == 1:
            return mount
        controllers = _read(mount.point / "cgroup.controllers") or ""
        if "cpu" in controllers.split():
            return mount
    return None


class CpuQuota:
    """A child cgroup of the hierarchy's root holding its processes to `cores` CPUs."""

    def __init__(self, cores: float, mount: Mount | None = None) -> None:
        if cores <= 0:
            raise ValueError(f"cores must be positive, got {cores}")
        self.cores = cores
        self.mount = mount
        self.path: Path | None = None
        self._enabled_cpu = False

    @property
    def version(self) -> int:
        assert self.mount is not None
        return self.mount.version

    def __enter__(self) -> Self:
        self.create()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.remove()

    def create(self) -> Path:
        """Makes the cgroup and sets its quota; StackError when the machine does not allow it."""
        self.mount = self.mount or cpu_hierarchy()
        if self.mount is None:
            raise StackError("no cgroup hierarchy with the cpu controller is mounted")
        path = self.mount.point / f"pinchpoint-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            if self.mount.version == 2:
                self._enable_cpu_controller()
            path.mkdir()
            self.path = path
            self._write_quota(path)
        except OSError as e:
            self.remove()
            raise StackError(f"could not make a cgroup with a CPU quota at {path}: {e}") from e
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
                self._empty_and_remove(path)
        finally:
            if self._enabled_cpu and self.mount is not None:
                self._enabled_cpu = False
                with contextlib.suppress(OSError):
                    (self.mount.point / "cgroup.subtree_control").write_text("-cpu\n")

    def _empty_and_remove(self, path: Path) -> None:
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

    def _write_quota(self, path: Path) -> None:
        quota = max(1000, round(self.cores * PERIOD_US))
        if self.version == 1:
            (path / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (path / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        else:
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")

    def _enable_cpu_controller(self) -> None:
        assert self.mount is not None
        control = self.mount.point / "cgroup.subtree_control"
        if "cpu" not in (_read(control) or "").split():
            control.write_text("+cpu\n")
            self._enabled_cpu = True


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
