"""Resource sampling: CPU and memory of each component's processes, the host and the generator.

    sampler = ResourceSampler({"nginx": ProcessSelector(pid_file=Path("nginx.pid"))})
    with sampler:
        ...  # run the load
    sampler.write(run_dir / "resources.parquet")
"""

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

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
    ]
)

_ERRORS = (psutil.NoSuchProcess, psutil.AccessDenied)


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

    def roots(self) -> list[int]:
        """The pids selected right now, before adding descendants; [] when none is found."""
        if self.pid_file is not None:
            return _read_pid_file(self.pid_file)
        if self.pids:
            return list(self.pids)
        return [proc.pid for proc in psutil.process_iter(["name", "cmdline"]) if self._named(proc)]

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
        self._components = {name: _Component() for name in self.targets}
        self._generator = _Component()
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
        """The samples so far: dicts with ts, component, cpu_cores, rss_bytes, processes."""
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
        ts = time.time()
        elapsed = now - self._last_sample
        rows = [_row(ts, HOST, *self._host.read(elapsed))]
        for name, selector in self.targets.items():
            pids = _with_descendants(selector.roots())
            rows.append(_row(ts, name, *self._components[name].read(pids, elapsed, ts)))
        rows.append(_row(ts, GENERATOR, *self._generator.read([os.getpid()], elapsed, ts)))
        self._last_sample = now
        if emit:
            with self._lock:
                self._rows.extend(rows)


class _Component:
    """The processes of one component, their psutil objects and CPU totals kept between samples
    so each sample counts only the CPU used since the previous one."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[psutil.Process, float]] = {}
        self._last_ts: float | None = None

    def read(self, pids: Iterable[int], elapsed: float, ts: float) -> tuple[float, int, int]:
        cpu_s = 0.0
        rss = 0
        seen: dict[int, tuple[psutil.Process, float]] = {}
        for pid in pids:
            proc, previous = self._known(pid)
            if proc is None:
                continue
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    rss += proc.memory_info().rss
                    total = times.user + times.system
                    if previous is None:
                        # A process born since the last sample used all its CPU in this
                        # interval; one already running when first seen gives a baseline.
                        born = self._last_ts is not None and proc.create_time() > self._last_ts
                        previous = 0.0 if born else total
            except _ERRORS:
                continue
            cpu_s += max(0.0, total - previous)
            seen[pid] = (proc, total)
        self._seen = seen
        self._last_ts = ts
        cores = cpu_s / elapsed if elapsed > 0 else 0.0
        return cores, rss, len(seen)

    def _known(self, pid: int) -> tuple[psutil.Process | None, float | None]:
        known = self._seen.get(pid)
        try:
            if known is not None and known[0].is_running():
                return known
            return psutil.Process(pid), None
        except _ERRORS:
            return None, None


class _Host:
    """Whole-machine CPU (cores busy) and used memory."""

    def __init__(self) -> None:
        self._cpus = psutil.cpu_count() or 1
        self._previous: tuple[float, float] | None = None

    def read(self, elapsed: float) -> tuple[float, int, int]:
        busy, total = _host_cpu_seconds()
        cores = 0.0
        if self._previous is not None and total > self._previous[1]:
            # Scaled by the kernel's own tick count rather than the wall clock, whose samples
            # are taken a little before or after /proc/stat is read.
            share = (busy - self._previous[0]) / (total - self._previous[1])
            cores = max(0.0, share) * self._cpus
        self._previous = (busy, total)
        return cores, psutil.virtual_memory().used, self._cpus


def _host_cpu_seconds() -> tuple[float, float]:
    times = psutil.cpu_times()
    total = sum(times)
    # On Linux guest time is already counted in user and nice.
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def _with_descendants(roots: list[int]) -> list[int]:
    pids = dict.fromkeys(roots)
    for pid in roots:
        try:
            pids.update(dict.fromkeys(child.pid for child in psutil.Process(pid).children(True)))
        except _ERRORS:
            continue
    return list(pids)


def _read_pid_file(path: Path) -> list[int]:
    try:
        text = path.read_text().strip()
    except OSError:
        return []
    return [int(text)] if text.isdigit() else []


def _row(
    ts: float, component: str, cpu_cores: float, rss_bytes: int, processes: int
) -> dict[str, Any]:
    return {
        "ts": ts,
        "component": component,
        "cpu_cores": cpu_cores,
        "rss_bytes": rss_bytes,
        "processes": processes,
    }
