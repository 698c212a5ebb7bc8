"""DiskLimit: the disk a path is on, the limit files of both cgroup versions, and a real
writer held to the rate."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pinchpoint.collect.resources.cgroups import Mount
from pinchpoint.demo.errors import StackError
from pinchpoint_lab import blkio
from pinchpoint_lab.blkio import DiskLimit, block_device, io_hierarchy

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = [pytest.mark.serial, pytest.mark.timeout(60)]

MIB = 1 << 20
# Appends 64 KiB and fsyncs, for argv[2] seconds once a line arrives on stdin; prints the
# bytes per second it wrote.
WRITER = """\
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
block = b"x" * 65536
sys.stdin.readline()
start = time.monotonic()
end = start + float(sys.argv[2])
written = 0
while time.monotonic() < end:
    written += os.write(fd, block)
    os.fsync(fd)
print(written / (time.monotonic() - start), flush=True)
"""


def on_a_disk(where: str) -> str:
    """The disk `where` is on; skips the test when it is on none (a tmpfs)."""
    try:
        return block_device(where)
    except StackError as e:
        pytest.skip(str(e))


def can_throttle(where: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    if io_hierarchy() is None:
        pytest.skip("no cgroup hierarchy with the blkio or io controller is mounted")
    on_a_disk(where)


def test_a_major_minor_is_kept_and_a_path_gives_its_disk() -> None:
    disk = on_a_disk(tempfile.gettempdir())
    assert block_device(None) == disk
    assert block_device(disk) == disk
    assert (blkio.SYS_BLOCK / disk).exists()
    assert not (blkio.SYS_BLOCK / disk / "partition").exists()


def test_a_partition_is_resolved_to_its_disk(tmp_path: Path, monkeypatch) -> None:
    disk = tmp_path / "devices" / "virtual" / "sda"
    (disk / "sda1").mkdir(parents=True)
    (disk / "dev").write_text("8:0\n")
    (disk / "sda1" / "dev").write_text("8:1\n")
    (disk / "sda1" / "partition").write_text("1\n")
    links = tmp_path / "dev" / "block"
    links.mkdir(parents=True)
    (links / "8:0").symlink_to(disk)
    (links / "8:1").symlink_to(disk / "sda1")
    monkeypatch.setattr(blkio, "SYS_BLOCK", links)
    assert block_device("8:1") == "8:0"
    assert block_device("8:0") == "8:0"
    with pytest.raises(StackError, match="not a block device"):
        block_device("8:2")


def test_a_filesystem_on_no_disk_is_refused() -> None:
    with pytest.raises(StackError):
        block_device("/proc")
    with pytest.raises(StackError):
        DiskLimit(MIB, "/no/such/path")
    with pytest.raises(ValueError):
        DiskLimit(0, "8:0")


def test_the_limit_files_of_both_versions(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(blkio, "_whole_disk", lambda number, where: number)
    v1 = DiskLimit(MIB, "8:0", read_bytes_s=2 * MIB, mount=Mount(1, "/", tmp_path))
    v1.write(tmp_path)
    assert (tmp_path / "blkio.throttle.write_bps_device").read_text() == f"8:0 {MIB}\n"
    assert (tmp_path / "blkio.throttle.read_bps_device").read_text() == f"8:0 {2 * MIB}\n"
    v2 = DiskLimit(MIB, "8:16", mount=Mount(2, "/", tmp_path))
    v2.write(tmp_path)
    assert (tmp_path / "io.max").read_text() == f"8:16 wbps={MIB}\n"
    DiskLimit(MIB, "8:16", read_bytes_s=5, mount=Mount(2, "/", tmp_path)).write(tmp_path)
    assert (tmp_path / "io.max").read_text() == f"8:16 wbps={MIB} rbps=5\n"


def test_a_writer_is_held_to_the_rate_and_the_cgroup_removed(tmp_path: Path) -> None:
    can_throttle(str(tmp_path))
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "data"), "2.5"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with DiskLimit(MIB, str(tmp_path)) as limit:
            limit.add([writer.pid])
            assert limit.pids() == [writer.pid]
            path = limit.path
            out, _ = writer.communicate("go\n", timeout=20)
    finally:
        writer.kill()
        writer.wait()
    assert float(out) == pytest.approx(MIB, rel=0.2)
    assert path is not None and not path.exists()


def test_the_cgroup_is_removed_when_the_block_fails() -> None:
    can_throttle(tempfile.gettempdir())
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    limit = DiskLimit(MIB)
    try:
        with pytest.raises(RuntimeError), limit:
            limit.add([sleeper.pid])
            path = limit.path
            raise RuntimeError("the run failed")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert path is not None and not path.exists() and limit.path is None
