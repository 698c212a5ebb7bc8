"""Resource sampling: CPU and memory of each component's processes, the host and the generator.

Usage::

    sampler = ResourceSampler({"nginx": ProcessSelector(pid_file=Path("nginx.pid"))})
    with sampler:
        ...  # run the load
    sampler.write(run_dir / "resources.parquet")
"""

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.collect.cgroups import Mount, Throttling, limiting_cgroup, read_mounts

MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 10.0
HOST = "host"
GENERATOR = "generator"
RESOURCES_FILE = "resources.parquet"

SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("component", pa.string()),
        ("cpu_cores", pa.float64()),
        ("rss_bytes", pa.int64()),
        ("processes", pa.int32()),
        # The CPU quota of the cgroups the component's processes run in (null: none), and
        # in this interval the CFS periods, the throttled ones and the time throttled.
        ("cpu_quota_cores", pa.float64()),
        ("cpu_periods", pa.int64()),
        ("cpu_throttled", pa.int64()),
        ("cpu_throttled_s", pa.float64()),
        # Processes whose title says they wait for a lock (PostgreSQL backends: "... waiting").
        ("lock_waits", pa.int32()),
        # Host rows only: the share of the interval in which some task waited for a CPU,
        # for memory and for I/O (pressure stall information), and the runnable tasks.
        ("cpu_pressure", pa.float64()),
        ("memory_pressure", pa.float64()),
        ("io_pressure", pa.float64()),
        ("run_queue", pa.int32()),
    ]
)
# Columns added after the first five: a table without them (an older agent) gets nulls.
OPTIONAL_COLUMNS = SCHEMA.names[5:]

_ERRORS = (psutil.NoSuchProcess, psutil.AccessDenied)
_TICK_S = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
_WAITING = " waiting"


def conform(table: pa.Table) -> pa.Table:
    """A samples table in SCHEMA, the columns it lacks of OPTIONAL_COLUMNS filled with nulls."""
    for name in OPTIONAL_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(
                SCHEMA.field(name), pa.nulls(table.num_rows, SCHEMA.field(name).type)
            )
    return table.select(SCHEMA.names).cast(SCHEMA)


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

    def processes(self) -> list[psutil.Process]:
        """The processes selected right now, descendants included; [] when none is found."""
        if self.pid_file is not None:
            roots = [_process(pid) for pid in _read_pid_file(self.pid_file)]
        elif self.pids:
            roots = [_process(pid) for pid in self.pids]
        else:
            roots = [proc for proc in psutil.process_iter(["name", "cmdline"]) if self._named(proc)]
        found: dict[int, psutil.Process] = {}
        for root in roots:
            if root is None or root.pid in found:
                continue
            found[root.pid] = root
            try:
                found.update((child.pid, child) for child in root.children(recursive=True))
            except _ERRORS:
                continue
        return list(found.values())

    def _named(self, proc: psutil.Process) -> bool:
        cmdline = proc.info.get("cmdline") or [""]
        return self.name in (proc.info.get("name"), os.path.basename(cmdline[0]))


class ResourceSampler:
    """Samples targets, the host and this process every interval_s in a background thread.

    Rows start one interval after start(): each needs a previous reading to measure CPU from.
    stop() takes a last sample if at least half an interval has passed since the previous one.
    """

    def __init__(self, targets: Mapping[str, ProcessSelector], interval_s: float = 1.0) -> None:
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
        mounts = read_mounts()
        self._components = {name: _Component(mounts) for name in self.targets}
        self._generator = _Component([])
        self._host = _Host()
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_sample = 0.0
        self._error: BaseException | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(raise_errors=exc is None)

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
        """The samples so far: dicts with the SCHEMA's columns (None where not measured)."""
        with self._lock:
            return [dict(row) for row in self._rows]

    def table(self) -> pa.Table:
        """The samples as a table with the resources.parquet schema."""
        return pa.Table.from_pylist(self.rows(), schema=SCHEMA)

    def write(self, path: Path) -> Path:
        """Writes resources.parquet at path (inside it when path is a folder); returns the file."""
        path = Path(path)
        if path.is_dir():
            path = path / RESOURCES_FILE
        pq.write_table(self.table(), path)
        return path

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
        for name, selector in self.targets.items():
            readings[name] = self._components[name].read(selector.processes())
        readings[GENERATOR] = self._generator.read([psutil.Process()])
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


@dataclass(frozen=True)
class _Reading:
    cpu_s: float  # CPU seconds used since the previous read
    rss: int
    processes: int
    extra: dict[str, Any] = field(default_factory=dict)  # the optional columns


class _Quota:
    """The CPU quota of the cgroups a component's processes run in, and the throttling
    counters at the previous read, so each read gives what happened since."""

    def __init__(self, mounts: list[Mount]) -> None:
        self._mounts = mounts
        self._last: dict[Path, Throttling] = {}

    def read(self, pids: Iterable[int]) -> dict[str, Any]:
        """The quota columns of one sample; all None when no process has a quota."""
        groups = {}
        for pid in pids if self._mounts else ():
            group = limiting_cgroup(pid, self._mounts)
            if group is not None:
                groups[group.path] = group
        now = {path: t for path, g in groups.items() if (t := g.throttling()) is not None}
        before, self._last = self._last, now
        if not now:
            return dict.fromkeys(
                ("cpu_quota_cores", "cpu_periods", "cpu_throttled", "cpu_throttled_s")
            )
        deltas = [(t, before.get(path, t)) for path, t in now.items()]
        return {
            "cpu_quota_cores": sum(groups[path].quota_cores for path in now),
            "cpu_periods": sum(t.periods - b.periods for t, b in deltas),
            "cpu_throttled": sum(t.throttled - b.throttled for t, b in deltas),
            "cpu_throttled_s": sum(t.throttled_s - b.throttled_s for t, b in deltas),
        }


class _Component:
    """The processes of one component, with the psutil objects and CPU totals kept between
    samples so that each sample counts only the CPU used since the previous one."""

    def __init__(self, mounts: list[Mount]) -> None:
        self._seen: dict[int, tuple[psutil.Process, float]] = {}
        self._last_boot_s: float | None = None
        self._quota = _Quota(mounts)

    def read(self, procs: Iterable[psutil.Process]) -> _Reading:
        """CPU seconds used since the previous read, resident bytes, process count, and the
        cgroup quota and lock-wait columns."""
        cpu_s = 0.0
        rss = 0
        waiting = 0
        seen: dict[int, tuple[psutil.Process, float]] = {}
        for fresh in procs:
            known = self._seen.get(fresh.pid)
            # Process equality includes the creation time, so a reused pid is a new process.
            proc, previous = known if known is not None and known[0] == fresh else (fresh, None)
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    memory = proc.memory_info()
                    total = times.user + times.system
                    if previous is None:
                        previous = 0.0 if self._born_since_last_read(proc) else total
                title = " ".join(proc.cmdline()).rstrip()
            except _ERRORS:
                continue
            cpu_s += max(0.0, total - previous)
            rss += memory.rss
            waiting += title.endswith(_WAITING)
            seen[proc.pid] = (proc, total)
        self._seen = seen
        self._last_boot_s = _since_boot()
        extra = {**self._quota.read(seen), "lock_waits": waiting}
        return _Reading(cpu_s, rss, len(seen), extra)

    def _born_since_last_read(self, proc: psutil.Process) -> bool:
        # A process started since the last read used all its CPU time in this interval; one
        # already running when first seen only gives a baseline.
        # Start times are whole clock ticks, rounded down.
        if self._last_boot_s is None:
            return False
        return proc.create_time() - psutil.boot_time() > self._last_boot_s - _TICK_S


class _Host:
    """Whole-machine CPU, used memory, pressure stalls and run queue."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._cpus = psutil.cpu_count() or 1
        self._busy_s: float | None = None
        self._proc = proc
        self._stalls: dict[str, float] = {}
        self._at = time.monotonic()

    def read(self) -> _Reading:
        """CPU seconds busy (all CPUs) since the previous read, used bytes, CPU count, and
        the pressure and run-queue columns."""
        busy_s = _host_busy_seconds()
        used_s = 0.0 if self._busy_s is None else max(0.0, busy_s - self._busy_s)
        self._busy_s = busy_s
        return _Reading(used_s, psutil.virtual_memory().used, self._cpus, self._extra())

    def _extra(self) -> dict[str, Any]:
        now = time.monotonic()
        elapsed, self._at = now - self._at, now
        extra: dict[str, Any] = {"run_queue": _run_queue(self._proc / "stat")}
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


PRESSURES = ("cpu", "memory", "io")


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


def _host_busy_seconds() -> float:
    times = psutil.cpu_times()
    # On Linux guest time is already counted in user and nice.
    counted_twice = getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - counted_twice - idle


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except _ERRORS:
        return None


def _since_boot() -> float:
    """Seconds since boot on the clock /proc uses for process start times."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - psutil.boot_time()


def _read_pid_file(path: Path) -> list[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return []
    return [int(text)] if text.isdigit() else []
