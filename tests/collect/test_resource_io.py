"""Disk, network, threads and memory limits in the resource samples, on real processes,
files, sockets and cgroups; the process table and the host's rates on fake inputs."""

import contextlib
import itertools
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from pinchpoint.collect.resources import cgroups, host
from pinchpoint.collect.resources.cgroups import Mount, memory_cgroup_of, memory_limit_of
from pinchpoint.collect.resources.links import LinkReader
from pinchpoint.collect.resources.procs import ProcessTable, descendants, parse_stat
from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler, conform
from pinchpoint.rundir.schemas import OPTIONAL_RESOURCE_COLUMNS, RESOURCES_SCHEMA

# Integrates sampled rates against known byte counts: runs alone, after the parallel part
# (beside three busy workers the sampler's stamps lag its reads by a few percent).
pytestmark = [
    pytest.mark.serial,
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc"),
]

MB = 1_000_000
# Writes argv[2] bytes to the file argv[1] with fsync when told to; prints its own count.
_WRITER = textwrap.dedent(
    """
    import os, sys
    print("ready", flush=True)
    sys.stdin.readline()
    with open(sys.argv[1], "wb") as f:
        for _ in range(int(sys.argv[2]) // 65536):
            f.write(os.urandom(65536))
        f.flush()
        os.fsync(f.fileno())
    with open("/proc/self/io") as io:
        own = dict(line.split(": ") for line in io.read().splitlines())
    print(int(own["write_bytes"]), flush=True)
    sys.stdin.read()
    """
)
_THREADS = textwrap.dedent(
    """
    import sys, threading
    for _ in range(int(sys.argv[1])):
        threading.Thread(target=sys.stdin.read, daemon=True).start()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


@contextlib.contextmanager
def spawned(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def of(rows: list[dict], component: str) -> list[dict]:
    return [row for row in rows if row["component"] == component]


def total(rows: list[dict], column: str) -> float:
    """A per-second column added up over the rows (each row covers the time since the
    previous one; the first row only starts the count)."""
    pairs = itertools.pairwise(rows)
    return sum((row[column] or 0.0) * (row["ts"] - prev["ts"]) for prev, row in pairs)


def test_disk_bytes_of_a_process_writing_with_fsync(tmp_path: Path) -> None:
    size = 8 * 2**20
    with spawned(_WRITER, str(tmp_path / "data"), str(size)) as writer:
        assert writer.stdin is not None and writer.stdout is not None
        targets = {"writer": ProcessSelector(pids=(writer.pid,))}
        with ResourceSampler(targets, interval_s=0.5) as sampler:
            time.sleep(0.7)  # a first row before the writes
            writer.stdin.write("go\n")
            writer.stdin.flush()
            own = int(writer.stdout.readline())
            time.sleep(1.2)
    if own < size:
        pytest.skip(f"the temporary folder is not on a disk: {own} bytes reached storage")
    rows = sampler.rows()
    written = total(of(rows, "writer"), "disk_write_bytes_s")
    assert size * 0.97 <= written <= own * 1.1, (written, own)
    assert all(row["disk_read_bytes_s"] is not None for row in of(rows, "writer"))
    host_rows = of(rows, "host")
    if all(row["disk_util"] is None for row in host_rows[1:]):
        pytest.skip("no physical disk is listed in /sys/block")
    # fsync sent it to a physical disk; the host's disks carry other writes too.
    assert total(host_rows, "disk_write_bytes_s") >= size * 0.97
    assert all(0.0 <= row["disk_util"] <= 1.0 for row in host_rows[1:])


def test_loopback_bytes_of_data_sent_over_a_local_socket() -> None:
    size = 40 * MB
    server = socket.create_server(("127.0.0.1", 0))
    received = []

    def drain() -> None:
        conn, _ = server.accept()
        with conn:
            n = 0
            while chunk := conn.recv(1 << 20):
                n += len(chunk)
            received.append(n)

    reader = threading.Thread(target=drain)
    reader.start()
    with ResourceSampler({}, interval_s=0.25) as sampler:
        time.sleep(0.35)
        with socket.create_connection(server.getsockname()) as client:
            client.sendall(b"x" * size)
        reader.join(timeout=20)
        time.sleep(0.4)
    server.close()
    assert received == [size]
    rows = of(sampler.rows(), "host")
    through = total(rows, "net_loopback_bytes_s")
    assert through >= size * 0.97, through
    assert all(row["net_rx_bytes_s"] is not None and row["net_rx_bytes_s"] >= 0 for row in rows)


def test_threads_of_a_component() -> None:
    with spawned(_THREADS, "4") as proc:
        sampler = ResourceSampler({"app": ProcessSelector(pids=(proc.pid,))}, interval_s=0.1)
        with sampler:
            time.sleep(0.25)
    assert {row["threads"] for row in of(sampler.rows(), "app")} == {5}


def test_memory_limit_of_the_host_is_its_memory() -> None:
    with ResourceSampler({}, interval_s=0.1) as sampler:
        time.sleep(0.15)
    assert {row["memory_limit_bytes"] for row in of(sampler.rows(), "host")} == {
        psutil.virtual_memory().total
    }


def test_memory_limit_files_of_both_versions(tmp_path: Path) -> None:
    (tmp_path / "memory.limit_in_bytes").write_text("268435456\n")
    (tmp_path / "memory.max").write_text("max\n")
    assert memory_limit_of(tmp_path, 1) == 268435456
    assert memory_limit_of(tmp_path, 2) is None
    (tmp_path / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (tmp_path / "memory.max").write_text("1073741824\n")
    assert memory_limit_of(tmp_path, 1) is None
    assert memory_limit_of(tmp_path, 2) == 1073741824
    assert memory_limit_of(tmp_path / "missing", 2) is None


def test_the_lowest_limit_on_the_path_holds(tmp_path: Path) -> None:
    leaf = tmp_path / "outer" / "inner"
    leaf.mkdir(parents=True)
    (tmp_path / "memory.max").write_text("max\n")
    (tmp_path / "outer" / "memory.max").write_text("1000000\n")
    (leaf / "memory.max").write_text("5000000\n")
    found = memory_cgroup_of({2: "/outer/inner"}, [Mount(2, "/", tmp_path)])
    assert found is not None
    assert (found.path, found.limit_bytes) == (tmp_path / "outer", 1000000)
    (tmp_path / "outer" / "memory.max").write_text("max\n")
    assert memory_cgroup_of({2: "/outer/inner"}, [Mount(2, "/", tmp_path)]).limit_bytes == 5000000
    assert memory_cgroup_of({1: "/outer/inner"}, [Mount(2, "/", tmp_path)]) is None


@contextlib.contextmanager
def memory_cgroup(limit: int) -> Iterator[Path]:
    """A throwaway cgroup with a memory limit, at the root of the memory hierarchy."""
    mounts = cgroups.read_mounts("memory")
    mount = next((m for m in mounts if m.version == 1), None)
    if mount is None:
        mount = next(
            (
                m
                for m in mounts
                if "memory" in (m.point / "cgroup.subtree_control").read_text().split()
            ),
            None,
        )
    if mount is None:
        pytest.skip("no cgroup hierarchy offers the memory controller")
    folder = mount.point / f"pinchpoint-test-{secrets.token_hex(4)}"
    folder.mkdir()
    try:
        name = "memory.limit_in_bytes" if mount.version == 1 else "memory.max"
        (folder / name).write_text(str(limit))
        yield folder
    finally:
        for pid in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (mount.point / "cgroup.procs").write_text(pid)
        folder.rmdir()


def test_memory_limit_of_a_real_cgroup() -> None:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    limit = 256 * 2**20
    with spawned(_THREADS, "0") as proc, memory_cgroup(limit) as folder:
        (folder / "cgroup.procs").write_text(str(proc.pid))
        with ResourceSampler({"app": ProcessSelector(pids=(proc.pid,))}, interval_s=0.1) as s:
            time.sleep(0.25)
    assert {row["memory_limit_bytes"] for row in of(s.rows(), "app")} == {limit}


def test_old_tables_get_the_new_columns_as_nulls() -> None:
    old = pa.table(
        {
            "ts": [1.0],
            "component": ["app"],
            "cpu_cores": [0.5],
            "rss_bytes": [10],
            "processes": [2],
            "lock_waits": [0],
        }
    )
    table = conform(old)
    assert table.schema == RESOURCES_SCHEMA
    row = table.to_pylist()[0]
    assert row["lock_waits"] == 0 and row["processes"] == 2
    assert all(row[name] is None for name in OPTIONAL_RESOURCE_COLUMNS if name != "lock_waits")


def fake_proc(root: Path, forks: int, procs: dict[int, int]) -> None:
    """A /proc with the fork counter and a stat line for each pid: parent."""
    (root / "self").mkdir(parents=True, exist_ok=True)
    (root / "self" / "stat").write_text("1 (x) S 0")
    (root / "stat").write_text(f"cpu  1 2 3 4\nprocesses {forks}\nprocs_running 1\n")
    for pid, ppid in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = ["S", str(ppid)] + ["0"] * 9 + ["100", "50"] + ["0"] * 4 + ["3", "0", "7000"]
        fields += ["0", "25"]
        (root / str(pid) / "stat").write_text(f"{pid} (w (x) y) {' '.join(fields)}\n")


def test_the_whole_table_is_read_only_when_a_process_may_have_started(tmp_path: Path) -> None:
    fake_proc(tmp_path, 100, {10: 1, 11: 10, 12: 11, 20: 1})
    table = ProcessTable(proc=tmp_path)
    assert set(table.read([10])) == {10, 11, 12, 20} and table.full
    assert table.born_after_s is None  # nothing read before
    assert set(table.read([10, 11, 12], also=[99])) == {10, 11, 12} and not table.full
    fake_proc(tmp_path, 101, {13: 12})  # a fork
    assert set(table.read([10, 11, 12])) == {10, 11, 12, 13, 20} and table.full
    assert table.born_after_s is not None
    (tmp_path / "11" / "stat").unlink()  # a process exits
    assert set(table.read([10, 11, 12])) == {10, 12, 13, 20} and table.full
    stats = table.read([10])
    assert not table.full
    assert descendants([10], table.read([10, 12, 13], whole=True)) == [10]
    stat = stats[10]
    assert (stat.ppid, stat.name, stat.threads) == (1, "w (x) y", 3)
    assert stat.cpu_s == pytest.approx(1.5)  # 150 ticks of 10 ms
    assert stat.rss == 25 * os.sysconf("SC_PAGE_SIZE")
    assert parse_stat(b"12 (short) S 1 2") is None


def test_host_network_rates_and_link_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    nic = namedtuple("nic", "isup duplex speed mtu flags")
    io = namedtuple("io", "bytes_recv bytes_sent")
    monkeypatch.setattr(
        host.psutil,
        "net_if_stats",
        lambda: {
            "lo": nic(True, 0, 0, 65536, "up,loopback,running"),
            "eth0": nic(True, 2, 1000, 1500, "up,broadcast,running"),
            "eth1": nic(True, 0, 0, 1500, "up,broadcast,running"),
        },
    )
    counters = {"lo": io(0, 0), "eth0": io(0, 0), "eth1": io(0, 0)}
    monkeypatch.setattr(host.psutil, "net_io_counters", lambda pernic: dict(counters))
    (tmp_path / "eth0").mkdir()
    (tmp_path / "eth0" / "speed").write_text("1000\n")
    links = LinkReader(netns_dir=tmp_path / "no-netns", sys_class_net=tmp_path)
    reader = host.HostReader(links=links)
    reader._network(1.0)
    counters.update(lo=io(8e6, 8e6), eth0=io(50e6, 5e6), eth1=io(1e6, 2e6))
    out = reader._network(2.0)
    assert out["net_rx_bytes_s"] == pytest.approx(25.5e6)
    assert out["net_tx_bytes_s"] == pytest.approx(3.5e6)
    assert out["net_loopback_bytes_s"] == pytest.approx(4e6)
    # eth0 receives 25 MB/s of a 1 Gbit/s link (125 MB/s); eth1 reports no speed.
    assert out["net_util"] == pytest.approx(0.2)
    assert out["net_link"] == "eth0"
