"""Resource sampling: CPU, memory, disk and sockets of each component's processes, the
host and the generator.

Usage::

    sampler = ResourceSampler({"nginx": ProcessSelector(pid_file=Path("nginx.pid"))})
    with sampler:
        ...  # run the load
    sampler.write(run_dir / "resources.parquet")

The host's columns are read in `host.py`, the process table in `procs.py`, the sockets in
`sockets.py` and the cgroup limits in `cgroups.py`.
"""

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.collect.resources.cgroups import CgroupReader, Throttling, read_mounts
from pinchpoint.collect.resources.host import HostReader, Reading
from pinchpoint.collect.resources.procs import TICK_S, ProcessTable, ProcStat, descendants, scan
from pinchpoint.collect.resources.schedstat import run_delay_s
from pinchpoint.collect.resources.sockets import SocketReader
from pinchpoint.collect.servers.watch import EMPTY, PoolWatch
from pinchpoint.lifecycle import Started
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import OPTIONAL_RESOURCE_COLUMNS, RESOURCES_SCHEMA

MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 10.0
HOST = "host"
GENERATOR = "generator"


_ERRORS = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)
_WAITING = " waiting"
# Only PostgreSQL's process titles tell lock waits; other processes' are not read.
_TITLED = frozenset({"postgres", "postmaster"})


def conform(table: pa.Table) -> pa.Table:
    """A samples table in RESOURCES_SCHEMA, the columns it lacks of OPTIONAL_RESOURCE_COLUMNS filled with nulls."""
    for name in OPTIONAL_RESOURCE_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(
                RESOURCES_SCHEMA.field(name),
                pa.nulls(table.num_rows, RESOURCES_SCHEMA.field(name).type),
            )
    return table.select(RESOURCES_SCHEMA.names).cast(RESOURCES_SCHEMA)


@dataclass(frozen=True)
class ProcessSelector:
    """Which processes make up a component: set exactly one of pid_file, pids or name.

    The selected processes and all their descendants are counted, resolved again at each
    sample, so workers started or replaced later are counted too. A name matches a process's
    name or the file name of its first command-line argument.
    """

    pid_file: Path | None = None
    pids: tuple[int, ...] = ()
    name: str | None = None

    def __post_init__(self) -> None:
        chosen = sum((self.pid_file is not None, bool(self.pids), self.name is not None))
        if chosen != 1:
            raise ValueError("a ProcessSelector needs exactly one of pid_file, pids or name")

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> "ProcessSelector":
        """From a plan's `process` table: {"pid_file": ...}, {"pids": [...]} or {"name": ...}."""
        unknown = set(spec) - {"pid_file", "pids", "name"}
        if unknown:
            raise ValueError(f"unknown process selector keys: {', '.join(sorted(unknown))}")
        pid_file = spec.get("pid_file")
        return cls(
            pid_file=Path(pid_file) if pid_file is not None else None,
            pids=tuple(int(pid) for pid in spec.get("pids", ())),
            name=spec.get("name"),
        )

    def roots(self) -> list[int] | None:
        """The pids of the pid file or of pids, as they are now; None for a name."""
        if self.pid_file is not None:
            return _read_pid_file(self.pid_file)
        return list(self.pids) if self.pids else None

    def __str__(self) -> str:
        if self.pid_file is not None:
            return f"pid_file {self.pid_file}"
        if self.pids:
            return f"pids {', '.join(map(str, self.pids))}"
        return f"name {self.name!r}"

    def why_none(self) -> str:
        """Why the selector finds no process, as far as can be told now."""
        if self.pid_file is None:
            return "no such process" if self.pids else "no process has that name"
        if not self.pid_file.exists():
            return "the file does not exist"
        roots = self.roots()
        if not roots:
            return "the file holds no pid"
        return f"pid {roots[0]} is not running"

    def select(
        self, table: dict[int, ProcStat] | None = None, roots: list[int] | None = None
    ) -> list[int]:
        """The pids selected right now, descendants included, from a process table (read
        now when not given) and the roots (read now when not given); [] when none is found."""
        table = scan() if table is None else table
        roots = self.roots() if roots is None else roots
        if roots is None:
            roots = [pid for pid, stat in table.items() if self._named(pid, stat)]
        return descendants(roots, table)

    def processes(self) -> list[psutil.Process]:
        """The processes selected right now, descendants included; [] when none is found."""
        return [proc for pid in self.select() if (proc := _process(pid)) is not None]

    def _named(self, pid: int, stat: ProcStat) -> bool:
        if stat.name == self.name:
            return True
        try:
            cmdline = psutil.Process(pid).cmdline() or [""]
        except _ERRORS:
            return False
        return self.name == os.path.basename(cmdline[0])


class ResourceSampler(Started):
    """Samples targets, the host and this process every interval_s in a background thread.

    Rows start one interval after start(): each needs a previous reading to measure CPU from.
    stop() takes a last sample if at least half an interval has passed since the previous one.
    """

    def __init__(
        self,
        targets: Mapping[str, ProcessSelector],
        interval_s: float = 1.0,
        server_files: bool = True,
    ) -> None:
        if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:
            raise ValueError(
                f"interval_s must be between {MIN_INTERVAL_S} and {MAX_INTERVAL_S}, "
                f"got {interval_s}"
            )
        reserved = {HOST, GENERATOR} & set(targets)
        if reserved:
            raise ValueError(f"component names reserved for the sampler: {sorted(reserved)}")
        self.targets = dict(targets)
        self.interval_s = interval_s
        self._sockets = SocketReader()
        self._cgroups = CgroupReader(read_mounts(), read_mounts("memory"))
        self._components = {
            name: _Component(self._cgroups, self._sockets, PoolWatch(server_files))
            for name in targets
        }
        self._generator = _Component(None, self._sockets, None)
        self._host = HostReader()
        self._procs = ProcessTable()
        self._selected: dict[str, list[int]] = {name: [] for name in targets}
        # Per target: samples in which it found no process, and why at the last of them.
        self._samples = 0
        self._missed: dict[str, int] = dict.fromkeys(targets, 0)
        self._why: dict[str, str] = {}
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sample = 0.0
        self._error: BaseException | None = None

    def leave(self, error: BaseException | None) -> None:
        """Stops sampling at the end of a `with` block; an error of the sampling thread is
        raised only when the block ended without one of its own."""
        self.stop(raise_errors=error is None)

    def start(self) -> None:
        """Takes the first readings and starts sampling in a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("the sampler is already started")
        self._stop.clear()
        self._sample(emit=False)
        self._thread = threading.Thread(target=self._run, name="pinchpoint-resources", daemon=True)
        self._thread.start()

    def stop(self, raise_errors: bool = True) -> None:
        """Stops sampling; re-raises (as RuntimeError) an error that stopped the thread early."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join()
        if self._error is None and time.monotonic() - self._last_sample >= self.interval_s / 2:
            self._sample(emit=True)
        if self._error is not None and raise_errors:
            raise RuntimeError(f"resource sampling failed: {self._error}") from self._error

    def rows(self) -> list[dict[str, Any]]:
        """The samples so far: dicts with the RESOURCES_SCHEMA's columns (None where not measured)."""
        with self._lock:
            return [dict(row) for row in self._rows]

    def warnings(self) -> dict[str, str]:
        """Per target that found no process in some sample, a line saying so: its rows
        there count nothing, which must not pass for an idle component."""
        out = {}
        for name, missed in self._missed.items():
            if missed:
                when = (
                    "any sample"
                    if missed == self._samples
                    else f"{missed} of {self._samples} samples"
                )
                out[name] = (
                    f"{name}: no process found for {self.targets[name]} in {when} "
                    f"({self._why[name]}): its resource rows count nothing there"
                )
        return out

    def table(self) -> pa.Table:
        """The samples as a table with the resources.parquet schema."""
        return pa.Table.from_pylist(self.rows(), schema=RESOURCES_SCHEMA)

    def write(self, path: Path) -> Path:
        """Writes resources.parquet at path (inside it when path is a folder); returns the file."""
        path = Path(path)
        if path.is_dir():
            path = path / files.RESOURCES
        pq.write_table(self.table(), path)
        return path

    def _select(self) -> dict[int, ProcStat]:
        """Reads the process table and each target's pids: all processes when due (see
        ProcessTable) or when a root, such as a restarted server's, is new; otherwise the
        processes of the previous sample, and the targets' names are not looked up again."""
        roots = {name: selector.roots() for name, selector in self.targets.items()}
        known = {pid for pids in self._selected.values() for pid in pids} | {os.getpid()}
        rooted = {pid for pids in roots.values() for pid in pids or ()}
        table = self._procs.read(known, also=rooted)
        if not self._procs.full and any(pid in table for pid in rooted - known):
            table = self._procs.read(known, whole=True)
        for name, selector in self.targets.items():
            if self._procs.full or roots[name] is not None:
                self._selected[name] = selector.select(table, roots[name])
            else:
                self._selected[name] = [pid for pid in self._selected[name] if pid in table]
        return table

    def _run(self) -> None:
        try:
            next_at = self._last_sample + self.interval_s
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                self._sample(emit=True)
                # Keep the schedule: a late sample must not shift all later ones.
                next_at = max(next_at + self.interval_s, time.monotonic())
        except Exception as exc:
            self._error = exc

    def _sample(self, emit: bool) -> None:
        now = time.monotonic()
        elapsed = now - self._last_sample
        readings = {HOST: self._host.read()}
        table = self._select()
        self._samples += 1
        for name, pids in self._selected.items():
            if not pids:
                self._missed[name] += 1
                self._why[name] = self.targets[name].why_none()
        self._sockets.new_sample()
        self._cgroups.new_sample()
        born_after = self._procs.born_after_s
        for name, pids in self._selected.items():
            readings[name] = self._components[name].read(pids, table, born_after, elapsed)
        readings[GENERATOR] = self._generator.read([os.getpid()], table, born_after, elapsed)
        # Stamped when read: states such as lock waits belong to this moment, not the start.
        ts = time.time()
        self._last_sample = now
        if not emit:
            return
        rows = [
            {
                "ts": ts,
                "component": name,
                "cpu_cores": reading.cpu_s / elapsed,
                "rss_bytes": reading.rss,
                "processes": reading.processes,
                **reading.extra,
            }
            for name, reading in readings.items()
        ]
        with self._lock:
            self._rows.extend(rows)


@dataclass
class _Seen:
    """A process at the previous read: its start (with the pid, its identity), CPU seconds,
    storage bytes read and written (None: not permitted), and its psutil handle (kept for
    PostgreSQL's, whose titles are read)."""

    start_s: float
    cpu_s: float
    io: tuple[int, int] | None
    proc: psutil.Process | None
    run_delay_s: float | None = None


class _Component:
    """The processes of one component, with what each had used at the previous read, so
    that each read counts only what was used since."""

    def __init__(
        self, cgroups: CgroupReader | None, sockets: SocketReader, pools: PoolWatch | None
    ) -> None:
        self._seen: dict[int, _Seen] = {}
        self._pools = pools
        self._cgroups = cgroups
        self._throttling: dict[Path, Throttling] = {}
        self._sockets = sockets

    def read(
        self,
        pids: list[int],
        table: dict[int, ProcStat],
        born_after_s: float | None,
        elapsed: float,
    ) -> Reading:
        """CPU seconds used since the previous read, resident bytes, process count, and the
        cgroup, lock-wait, disk, thread and socket columns. A process first seen that
        started after `born_after_s` (seconds after boot) could not have been seen before:
        all it used counts; one already running when first seen only gives a baseline."""
        cpu_s = 0.0
        rss = threads = waiting = 0
        disk: list[int] | None = None
        waited: float | None = None
        seen: dict[int, _Seen] = {}
        # Start times are whole clock ticks, rounded down.
        born_after = None if born_after_s is None else born_after_s - TICK_S
        for pid in pids:
            stat = table.get(pid)
            if stat is None:
                continue
            old = self._seen.get(pid)
            if old is not None and old.start_s != stat.start_s:
                old = None  # the pid was reused
            new = old is None and born_after is not None and stat.start_s > born_after
            before = old.cpu_s if old is not None else 0.0 if new else stat.cpu_s
            cpu_s += max(0.0, stat.cpu_s - before)
            io = _io(pid)
            if io is not None:
                base = old.io if old is not None and old.io is not None else None
                base = base or ((0, 0) if new else io)
                disk = disk or [0, 0]
                disk[0] += max(0, io[0] - base[0])
                disk[1] += max(0, io[1] - base[1])
            delay = run_delay_s(pid)
            if delay is not None:
                base_delay = old.run_delay_s if old is not None else None
                base_delay = base_delay if base_delay is not None else 0.0 if new else delay
                waited = (waited or 0.0) + max(0.0, delay - base_delay)
            rss += stat.rss
            threads += stat.threads
            proc = old.proc if old is not None else None
            if stat.name in _TITLED:
                proc = proc or _process(pid)
                waiting += _title(proc).endswith(_WAITING)
            seen[pid] = _Seen(stat.start_s, stat.cpu_s, io, proc, delay)
        self._seen = seen
        extra: dict[str, Any] = {
            "lock_waits": waiting,
            "threads": threads,
            "cpu_wait_cores": waited / elapsed if waited is not None else None,
            "disk_read_bytes_s": disk[0] / elapsed if disk is not None else None,
            "disk_write_bytes_s": disk[1] / elapsed if disk is not None else None,
            **self._sockets.read({pid: s.start_s for pid, s in seen.items()}),
        }
        if self._cgroups is not None:
            extra.update(self._cgroups.read(seen, self._throttling))
        extra.update(self._pools.columns(list(seen), table) if self._pools else EMPTY)
        return Reading(cpu_s, rss, len(seen), extra)


def _io(pid: int) -> tuple[int, int] | None:
    """Bytes the process had read from and written to storage (read_bytes, write_bytes of
    /proc/<pid>/io); None when not permitted, or not Linux."""
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    fields = dict(line.split(b": ", 1) for line in lines if b": " in line)
    try:
        return int(fields[b"read_bytes"]), int(fields[b"write_bytes"])
    except (KeyError, ValueError):
        return None


def _title(proc: psutil.Process | None) -> str:
    try:
        return " ".join(proc.cmdline()).rstrip() if proc is not None else ""
    except _ERRORS:
        return ""


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except _ERRORS:
        return None


def _read_pid_file(path: Path) -> list[int]:
    """The pid on the first line: daemons such as PostgreSQL (postmaster.pid) write more
    lines after it."""
    try:
        with path.open("rb") as f:
            first = f.readline(64).strip()
    except OSError:
        return []
    return [int(first)] if first.isdigit() else []
