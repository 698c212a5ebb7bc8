"""The disk rates a component's cgroups throttle it to: the blkio (v1) and io.max (v2)
files, which cgroups on the path hold it, the sum over a component's cgroups, and a real
throttled writer sampled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinchpoint.collect.resources import cgroups
from pinchpoint.collect.resources.cgroups import (
    CgroupReader,
    DiskCgroups,
    DiskRate,
    Mount,
    disk_cgroups_of,
    disk_rates_of,
)
from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.demo.errors import StackError
from pinchpoint_lab.blkio import DiskLimit, block_device, io_hierarchy

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(60)]

MIB = 1 << 20
# Appends 64 KiB and fsyncs, for argv[2] seconds once a line arrives on stdin.
WRITER = """\
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
block = b"x" * 65536
sys.stdin.readline()
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    os.write(fd, block)
    os.fsync(fd)
"""


def test_the_rate_files_of_both_versions(tmp_path: Path) -> None:
    (tmp_path / "blkio.throttle.write_bps_device").write_text("8:0 1048576\n254:0 5000\n")
    (tmp_path / "blkio.throttle.read_bps_device").write_text("")
    assert disk_rates_of(tmp_path, 1) == ({}, {"8:0": 1048576, "254:0": 5000})
    (tmp_path / "io.max").write_text(
        "8:16 rbps=2097152 wbps=max riops=max wiops=120\n8:0 rbps=max wbps=4096 riops=max\n"
    )
    assert disk_rates_of(tmp_path, 2) == ({"8:16": 2097152}, {"8:0": 4096})
    (tmp_path / "io.max").write_text("")
    assert disk_rates_of(tmp_path, 2) == ({}, {})
    assert disk_rates_of(tmp_path / "missing", 1) == ({}, {})


def test_v2_takes_the_lowest_rate_per_disk_on_the_path(tmp_path: Path) -> None:
    leaf = tmp_path / "outer" / "inner"
    leaf.mkdir(parents=True)
    (tmp_path / "outer" / "io.max").write_text("8:0 rbps=max wbps=1000\n8:16 wbps=7\n")
    (leaf / "io.max").write_text("8:0 rbps=300 wbps=5000\n")
    found = disk_cgroups_of({2: "/outer/inner"}, [Mount(2, "/", tmp_path)])
    assert found == DiskCgroups(
        read=(DiskRate("8:0", leaf, 300),),
        write=(DiskRate("8:0", tmp_path / "outer", 1000), DiskRate("8:16", tmp_path / "outer", 7)),
    )
    (tmp_path / "outer" / "io.max").write_text("")
    (leaf / "io.max").write_text("")
    assert disk_cgroups_of({2: "/outer/inner"}, [Mount(2, "/", tmp_path)]) is None


def test_v1_takes_the_own_cgroups_rate_only(tmp_path: Path) -> None:
    # v1 throttling is flat: a parent's rate does not hold the processes of its children.
    leaf = tmp_path / "outer" / "inner"
    leaf.mkdir(parents=True)
    (tmp_path / "outer" / "blkio.throttle.write_bps_device").write_text("8:0 1000\n")
    (leaf / "blkio.throttle.write_bps_device").write_text("")
    assert disk_cgroups_of({1: "/outer/inner"}, [Mount(1, "/", tmp_path)]) is None
    found = disk_cgroups_of({1: "/outer"}, [Mount(1, "/", tmp_path)])
    assert found == DiskCgroups((), (DiskRate("8:0", tmp_path / "outer", 1000),))


def test_a_component_sums_its_distinct_cgroups(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "blkio"
    for name, rate in (("a", 1000), ("b", 3000)):
        (root / name).mkdir(parents=True)
        (root / name / "blkio.throttle.write_bps_device").write_text(f"8:0 {rate}\n")
        (root / name / "blkio.throttle.read_bps_device").write_text("")
    for pid, name in ((41, "a"), (42, "a"), (43, "b"), (44, "")):
        (tmp_path / "proc" / str(pid)).mkdir(parents=True)
        (tmp_path / "proc" / str(pid) / "cgroup").write_text(f"7:blkio:/{name}\n0::/\n")
    monkeypatch.setattr(cgroups, "PROC", tmp_path / "proc")
    reader = CgroupReader([], [], blkio=[Mount(1, "/", root)])
    reader.new_sample()
    out = reader.read([41, 42, 43, 44], {})
    assert out["disk_write_limit_bytes_s"] == 4000
    assert out["disk_read_limit_bytes_s"] is None
    assert reader.read([44, 45], {})["disk_write_limit_bytes_s"] is None
    assert CgroupReader([], [], blkio=[]).read([41], {})["disk_write_limit_bytes_s"] is None


def test_a_throttled_writer_is_sampled_with_its_limit(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    if io_hierarchy() is None:
        pytest.skip("no cgroup hierarchy with the blkio or io controller is mounted")
    try:
        block_device(str(tmp_path))
    except StackError as e:
        pytest.skip(str(e))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "data"), "2.5"],
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        with DiskLimit(MIB, str(tmp_path), read_bytes_s=4 * MIB) as limit:
            limit.add([writer.pid])
            with ResourceSampler({"w": ProcessSelector(pids=(writer.pid,))}, 0.5) as sampler:
                writer.communicate("go\n", timeout=20)
                time.sleep(0.1)
    finally:
        writer.kill()
        writer.wait()
    rows = [r for r in sampler.rows() if r["component"] == "w" and r["processes"]]
    assert len(rows) >= 3, rows
    assert {r["disk_write_limit_bytes_s"] for r in rows} == {MIB}
    assert {r["disk_read_limit_bytes_s"] for r in rows} == {4 * MIB}
    written = sum(r["disk_write_bytes_s"] for r in rows) / len(rows)
    assert written == pytest.approx(MIB, rel=0.25), rows
    others = [r for r in sampler.rows() if r["component"] != "w"]
    assert all(r.get("disk_write_limit_bytes_s") is None for r in others)


def test_sampled_without_a_limit_the_columns_are_null() -> None:
    own = cgroups.process_cgroups(Path("/proc/self/cgroup").read_text(), "blkio")
    if disk_cgroups_of(own, cgroups.read_mounts("blkio")) is not None:
        pytest.skip("the tests run in a cgroup with a disk limit")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        with ResourceSampler({"s": ProcessSelector(pids=(sleeper.pid,))}, 0.1) as sampler:
            time.sleep(0.25)
    finally:
        sleeper.kill()
        sleeper.wait()
    table = sampler.table()
    assert table.column("disk_write_limit_bytes_s").null_count == table.num_rows
    assert table.column("disk_read_limit_bytes_s").null_count == table.num_rows
