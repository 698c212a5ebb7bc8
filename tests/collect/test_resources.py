import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(60)]

_BUSY = textwrap.dedent(
    """
    import time
    print("ready", flush=True)
    end = time.time() + 1.5
    while time.time() < end:
        pass
    print(f"cpu={time.process_time()}", flush=True)
    """
)
_NICED_BUSY = "import os\nos.nice(19)\n" + _BUSY
_SLEEPY = "import time\nprint('ready', flush=True)\ntime.sleep(30)"
# A parent with a child and, through sh, a grandchild; one more child per line on stdin.
_PARENT = textwrap.dedent(
    """
    import os, subprocess, sys
    kids = [subprocess.Popen(["sleep", "30"]), subprocess.Popen(["sh", "-c", "sleep 30 & wait"])]
    with open(sys.argv[1], "w") as pid_file:
        pid_file.write(str(os.getpid()))
    print("ready", flush=True)
    for _ in sys.stdin:
        kids.append(subprocess.Popen(["sleep", "30"]))
        print("spawned", flush=True)
    """
)


class Started:
    """Python scripts run in their own process groups, killed with their children at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def __call__(self, script: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        return proc

    def kill_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


@pytest.fixture
def started() -> Iterator[Started]:
    scripts = Started()
    yield scripts
    scripts.kill_all()


def of(rows: list[dict], component: str) -> list[dict]:
    return [row for row in rows if row["component"] == component]


def test_busy_process_uses_a_core_and_sleeping_one_none(started: Started) -> None:
    busy = started(_BUSY)
    sleepy = started(_SLEEPY)
    targets = {
        "busy": ProcessSelector(pids=(busy.pid,)),
        "sleepy": ProcessSelector(pids=(sleepy.pid,)),
    }
    with ResourceSampler(targets, interval_s=0.2) as sampler:
        busy.wait(timeout=10)
        time.sleep(0.3)
    rows = sampler.rows()

    alive = [row for row in of(rows, "busy") if row["processes"] == 1]
    assert len(alive) >= 5
    middle = [row["cpu_cores"] for row in alive[1:-1]]
    assert all(cores < 1.3 for cores in middle), middle
    # On a shared machine the busy loop may not get a whole core; what the sampler saw must
    # still add up to the CPU time the process itself counted.
    assert busy.stdout is not None
    own_cpu = float(busy.stdout.readline().strip().removeprefix("cpu="))
    busy_rows = of(rows, "busy")
    seen = sum(
        row["cpu_cores"] * (row["ts"] - prev["ts"]) for prev, row in itertools.pairwise(busy_rows)
    )
    # The CPU used before the first sample (one interval at most) is not seen.
    assert own_cpu - 0.25 - 0.1 <= seen <= own_cpu + 0.1, (seen, own_cpu)
    assert own_cpu > 0.3
    assert of(rows, "busy")[-1]["processes"] == 0  # exited, then reaped by wait()

    sleepy_rows = of(rows, "sleepy")
    assert all(row["processes"] == 1 for row in sleepy_rows)
    assert all(row["cpu_cores"] < 0.1 for row in sleepy_rows), sleepy_rows
    assert all(row["rss_bytes"] > 1_000_000 for row in sleepy_rows)


def test_pid_file_counts_descendants_and_new_children(started: Started, tmp_path: Path) -> None:
    pid_file = tmp_path / "parent.pid"
    parent = started(_PARENT, str(pid_file))
    assert parent.stdin is not None and parent.stdout is not None
    with ResourceSampler({"app": ProcessSelector(pid_file=pid_file)}, interval_s=0.1) as sampler:
        time.sleep(0.35)
        parent.stdin.write("more\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == "spawned\n"
        time.sleep(0.35)
    counts = [row["processes"] for row in of(sampler.rows(), "app")]
    # parent + sleep + sh + its sleep, then one more sleep
    assert counts[0] == 4
    assert counts[-1] == 5
    assert set(counts) == {4, 5}


def test_vanished_and_missing_processes_are_skipped(started: Started, tmp_path: Path) -> None:
    short = started(_SLEEPY)
    gone = subprocess.Popen(["true"])
    gone.wait()
    targets = {
        "short": ProcessSelector(pids=(short.pid,)),
        "gone": ProcessSelector(pids=(gone.pid,)),
        "no_pid_file": ProcessSelector(pid_file=tmp_path / "absent.pid"),
    }
    with ResourceSampler(targets, interval_s=0.1) as sampler:
        time.sleep(0.25)
        short.kill()
        short.wait(timeout=10)
        time.sleep(0.25)
    rows = sampler.rows()
    assert of(rows, "short")[0]["processes"] == 1
    assert of(rows, "short")[-1]["processes"] == 0
    for name in ("gone", "no_pid_file"):
        readings = {
            (row["processes"], row["cpu_cores"], row["rss_bytes"]) for row in of(rows, name)
        }
        assert readings == {(0, 0.0, 0)}


def test_name_selector_matches_the_program_name(started: Started) -> None:
    proc = subprocess.Popen(["pinchpoint-test-sleeper", "30"], executable="sleep")
    try:
        with ResourceSampler(
            {"named": ProcessSelector(name="pinchpoint-test-sleeper")}, interval_s=0.1
        ) as sampler:
            time.sleep(0.25)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert {row["processes"] for row in of(sampler.rows(), "named")} == {1}


def test_host_and_generator_rows_in_every_sample() -> None:
    with ResourceSampler({}, interval_s=0.1) as sampler:
        time.sleep(0.35)
    rows = sampler.rows()
    stamps = sorted({row["ts"] for row in rows})
    assert len(stamps) >= 3
    cpus = psutil.cpu_count()
    for ts in stamps:
        at = {row["component"]: row for row in rows if row["ts"] == ts}
        assert set(at) == {"host", "generator"}
        assert at["host"]["processes"] == cpus
        assert 0.0 <= at["host"]["cpu_cores"] <= cpus * 1.1
        assert at["host"]["rss_bytes"] > 0
        assert at["generator"]["processes"] == 1
        assert at["generator"]["rss_bytes"] > 0


def test_writes_parquet_with_exact_schema(tmp_path: Path, started: Started) -> None:
    sleepy = started(_SLEEPY)
    with ResourceSampler({"app": ProcessSelector(pids=(sleepy.pid,))}, interval_s=0.1) as sampler:
        time.sleep(0.25)
    path = sampler.write(tmp_path)
    assert path == tmp_path / "resources.parquet"
    schema = pq.read_schema(path)
    assert schema.names[:5] == ["ts", "component", "cpu_cores", "rss_bytes", "processes"]
    assert schema.types[:5] == [pa.float64(), pa.string(), pa.float64(), pa.int64(), pa.int32()]
    assert schema.names[5:] == [
        "cpu_quota_cores",
        "cpu_periods",
        "cpu_throttled",
        "cpu_throttled_s",
        "cpu_wait_cores",
        "lock_waits",
        "cpu_nice_cores",
        "cpu_pressure",
        "memory_pressure",
        "io_pressure",
        "run_queue",
        "disk_read_bytes_s",
        "disk_write_bytes_s",
        "disk_util",
        "net_rx_bytes_s",
        "net_tx_bytes_s",
        "net_loopback_bytes_s",
        "net_util",
        "net_link",
        "net_link_bytes_s",
        "net_link_limit_bytes_s",
        "net_qdisc_backlog_bytes",
        "net_qdisc_drops_s",
        "net_qdisc_overlimits_s",
        "memory_limit_bytes",
        "threads",
        "listen_backlog",
        "listen_backlog_limit",
        "connections",
        "disk_read_limit_bytes_s",
        "disk_write_limit_bytes_s",
        "pool_slots",
        "pool_kind",
        "pool_source",
        "pool_server",
    ]
    frame = pl.read_parquet(path)
    assert frame.height == len(sampler.rows())
    assert set(frame["component"]) == {"host", "app", "generator"}

    empty = ResourceSampler({}).write(tmp_path / "empty.parquet")
    assert pq.read_schema(empty).types == schema.types


@pytest.mark.parametrize("interval_s", [0.05, 10.5])
def test_interval_is_validated(interval_s: float) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        ResourceSampler({}, interval_s=interval_s)


def test_reserved_names_and_selectors_are_validated() -> None:
    with pytest.raises(ValueError, match="reserved"):
        ResourceSampler({"host": ProcessSelector(pids=(1,))})
    with pytest.raises(ValueError, match="exactly one"):
        ProcessSelector()
    with pytest.raises(ValueError, match="exactly one"):
        ProcessSelector(pids=(1,), name="x")
    assert ProcessSelector.from_dict({"pid_file": "/x.pid"}) == ProcessSelector(
        pid_file=Path("/x.pid")
    )
    assert ProcessSelector.from_dict({"pids": [3, 4]}).pids == (3, 4)
    with pytest.raises(ValueError, match="unknown"):
        ProcessSelector.from_dict({"pidfile": "/x.pid"})


def test_pressure_and_run_queue_files_are_read(tmp_path: Path) -> None:
    from pinchpoint.collect.resources.host import _run_queue, _stall_seconds

    (tmp_path / "cpu").write_text(
        "some avg10=9.35 avg60=2.77 avg300=0.62 total=5467726\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert _stall_seconds(tmp_path / "cpu") == pytest.approx(5.467726)
    (tmp_path / "garbled").write_text("full total=12\n")
    assert _stall_seconds(tmp_path / "garbled") is None
    assert _stall_seconds(tmp_path / "absent") is None
    (tmp_path / "stat").write_text("cpu  1 2 3 4\nprocs_running 5\nprocs_blocked 0\n")
    assert _run_queue(tmp_path / "stat") == 4  # the reading process itself is left out
    assert _run_queue(tmp_path / "absent") is None


@pytest.mark.skipif(not Path("/proc/pressure/cpu").exists(), reason="the kernel keeps no PSI")
def test_more_busy_processes_than_cores_show_as_cpu_pressure(started: Started) -> None:
    cpus = psutil.cpu_count() or 1
    with ResourceSampler({}, interval_s=0.2) as sampler:
        for _ in range(2 * cpus):
            started(_BUSY)
        time.sleep(1.0)
    host = [row for row in of(sampler.rows(), "host") if row["cpu_pressure"] is not None]
    assert host, "no host sample carried a CPU pressure share"
    assert all(0.0 <= row["cpu_pressure"] <= 1.0 for row in host)
    # Twice as many runnable processes as cores: some task waits for a CPU nearly always.
    assert max(row["cpu_pressure"] for row in host) >= 0.5
    assert max(row["run_queue"] for row in host) >= cpus


def _failing_after_first_sample(sampler: ResourceSampler, monkeypatch: pytest.MonkeyPatch) -> None:
    def gone() -> None:
        raise OSError("host readings gone")

    monkeypatch.setattr(sampler._host, "read", gone)
    time.sleep(0.3)  # the thread samples and fails


def test_a_sampling_failure_ends_the_block_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with (
        pytest.raises(RuntimeError, match="resource sampling failed: host readings gone"),
        ResourceSampler({}, interval_s=0.1) as sampler,
    ):
        _failing_after_first_sample(sampler, monkeypatch)


def test_a_failing_block_keeps_its_own_error_over_the_samplers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(KeyError, match="the block's"), ResourceSampler({}, interval_s=0.1) as s:
        _failing_after_first_sample(s, monkeypatch)
        raise KeyError("the block's")


def test_a_busy_loop_at_low_priority_shows_as_niced_cpu(started: Started) -> None:
    with ResourceSampler({}, interval_s=0.2) as sampler:
        niced = started(_NICED_BUSY)
        niced.wait(timeout=10)
        plain = started(_BUSY)
        plain.wait(timeout=10)
    host = of(sampler.rows(), "host")
    assert len(host) >= 10
    niced_s = sum(
        (row["cpu_nice_cores"] or 0.0) * (row["ts"] - prev["ts"])
        for prev, row in itertools.pairwise(host)
    )
    # 1.5 s of a niced loop, then 1.5 s of a loop at normal priority: only the first counts.
    assert 1.0 <= niced_s <= 1.8, niced_s
    assert max(row["cpu_nice_cores"] or 0.0 for row in host) <= 1.2
