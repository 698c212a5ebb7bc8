"""The host's process table for the resource sampler, read once per sample for every
component: each process's parent, start time, CPU time, threads and resident memory.

On Linux it is read from /proc/<pid>/stat, one small file per process: finding a
component's descendants needs every process's parent anyway, and the same line gives the
rest. Elsewhere psutil gives the same fields.

A read of every process costs most of a sample, and new processes are rare, so
`ProcessTable` reads them all only when the host has started a process (or thread) since
its last read — the fork counter of /proc/stat moved — or when a process it was asked for
is gone; otherwise only the processes asked for, which are then exactly the same.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

PROC = Path("/proc")
TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class ProcStat:
    """One process: its parent, name (comm), when it started (seconds after boot: a pid and
    its start name one process, as pids are reused), CPU seconds used so far (user +
    system), threads and resident bytes."""

    ppid: int
    name: str
    start_s: float
    cpu_s: float
    threads: int
    rss: int


class ProcessTable:
    """The process table, read whole when a process may have started since the last
    read, or when asked to; otherwise only the processes asked for."""

    def __init__(self, proc: Path = PROC) -> None:
        self._proc = proc
        self._forks: int | None = None
        self._scanned_s: float | None = None
        # Whether the last read was whole, and when (seconds after boot) the whole read
        # before it started: a process first seen now that started after that could not
        # have been seen before.
        self.full = False
        self.born_after_s: float | None = None

    def read(
        self, wanted: Iterable[int], also: Iterable[int] = (), whole: bool = False
    ) -> dict[int, ProcStat]:
        """The processes `wanted` and those of `also` that exist; all processes when
        `whole`, when a process may have started since the last read or when one of
        `wanted` is gone."""
        forks, self._forks = self._forks, forks_since_boot(self._proc)
        if not whole and forks is not None and forks == self._forks:
            wanted = set(wanted)
            table = scan(self._proc, wanted | set(also))
            if wanted <= table.keys():
                self.full = False
                return table
        self.born_after_s, self._scanned_s = self._scanned_s, since_boot()
        self.full = True
        return scan(self._proc)


def scan(proc: Path = PROC, pids: Iterable[int] | None = None) -> dict[int, ProcStat]:
    """Every process of the host (of this pid namespace), or those of `pids` that exist,
    by pid."""
    if not (proc / "self" / "stat").exists():
        table = _scan_psutil()
        return table if pids is None else {pid: table[pid] for pid in pids if pid in table}
    names = (n for n in os.listdir(proc) if n.isdigit()) if pids is None else map(str, pids)
    table = {}
    for name in names:
        try:
            with open(f"{proc}/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:  # gone since listed, or not readable
            continue
        stat = parse_stat(data)
        if stat is not None:
            table[int(name)] = stat
    return table


def forks_since_boot(proc: Path = PROC) -> int | None:
    """Processes and threads the host has started since boot (`processes` of /proc/stat);
    None when it cannot tell."""
    try:
        with open(f"{proc}/stat", "rb") as f:
            for line in f:
                if line.startswith(b"processes "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def since_boot() -> float:
    """Seconds since boot on the clock /proc uses for process start times."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - psutil.boot_time()


def parse_stat(data: bytes) -> ProcStat | None:
    """The fields of one /proc/<pid>/stat line; None when it cannot be read."""
    # The name is in parentheses and may hold anything, parentheses and spaces included.
    left, right = data.find(b"("), data.rfind(b")")
    fields = data[right + 2 :].split()
    if left < 0 or right < left or len(fields) < 22:
        return None
    try:
        return ProcStat(
            ppid=int(fields[1]),
            name=data[left + 1 : right].decode(errors="replace"),
            start_s=int(fields[19]) * TICK_S,
            cpu_s=(int(fields[11]) + int(fields[12])) * TICK_S,
            threads=int(fields[17]),
            rss=int(fields[21]) * _PAGE,
        )
    except ValueError:
        return None


def descendants(roots: Iterable[int], table: dict[int, ProcStat]) -> list[int]:
    """The roots that exist and all their descendants, each once, roots first."""
    children: dict[int, list[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: dict[int, None] = {}
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop(0)
        if pid not in found:
            found[pid] = None
            todo.extend(children.get(pid, ()))
    return list(found)


def _scan_psutil() -> dict[int, ProcStat]:
    boot = psutil.boot_time()
    table = {}
    attrs = ["ppid", "name", "create_time", "cpu_times", "num_threads", "memory_info"]
    for proc in psutil.process_iter(attrs):
        info = proc.info
        if info["cpu_times"] is None or info["memory_info"] is None:
            continue
        table[proc.pid] = ProcStat(
            ppid=info["ppid"] or 0,
            name=info["name"] or "",
            start_s=(info["create_time"] or boot) - boot,
            cpu_s=info["cpu_times"].user + info["cpu_times"].system,
            threads=info["num_threads"] or 0,
            rss=info["memory_info"].rss,
        )
    return table
