"""A component's server pool for the resource sampler: read once per main process (again
when it is replaced), as the columns `pool_slots`, `pool_kind`, `pool_source` and `pool_server`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol

from pinchpoint.collect.servers import pool_of
from pinchpoint.collect.servers.pool import Pool, read_process


class _Stat(Protocol):
    """What the pool watch reads of a process in the sampler's table (its ProcStat)."""

    @property
    def ppid(self) -> int: ...
    @property
    def start_s(self) -> float: ...


EMPTY: dict[str, Any] = {
    "pool_slots": None,
    "pool_kind": None,
    "pool_source": None,
    "pool_server": None,
}


class PoolWatch:
    """Reads the pool of the server among a component's processes. `files`: whether its
    config files and environment may be read (the agent reads only what its config names)."""

    def __init__(self, files: bool = True, cores: int | None = None) -> None:
        self.files = files
        self.cores = cores or os.cpu_count() or 1
        self._known: dict[tuple[int, float], Pool | None] = {}

    def columns(self, pids: list[int], table: Mapping[int, _Stat]) -> dict[str, Any]:
        """The pool's columns for one sample of the component's processes."""
        chosen = set(pids)
        roots = [pid for pid in pids if pid in table and table[pid].ppid not in chosen]
        for root in roots:
            found = self._pool(root, table, chosen)
            if found is not None:
                return {
                    "pool_slots": found.slots,
                    "pool_kind": found.kind,
                    "pool_source": found.source,
                    "pool_server": found.server,
                }
        return dict(EMPTY)

    def _pool(self, root: int, table: Mapping[int, _Stat], chosen: set[int]) -> Pool | None:
        key = (root, table[root].start_s)
        if key not in self._known:
            children = sum(1 for pid in chosen if pid in table and table[pid].ppid == root)
            process = read_process(root, children, environ=self.files)
            self._known[key] = pool_of(process, self.cores, self.files) if process else None
        return self._known[key]
