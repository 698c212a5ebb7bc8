"""cgroup CPU quotas and throttling: parsing on v1 and v2 files, and a real cgroup sampled."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinchpoint.collect.resources import cgroups
from pinchpoint.collect.resources.cgroups import (
    CpuCgroup,
    Mount,
    cpu_mounts,
    limiting_cgroup,
    process_cgroups,
    quota_of,
)
from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint_lab.cgroup import CpuQuota, cpu_hierarchy

# Measures time, rates or CPU: runs alone, after the parallel part of the suite.
pytestmark = pytest.mark.serial

MOUNTINFO = """\
25 30 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755
26 25 0:23 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:24 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:25 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
29 25 0:26 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
30 25 0:27 / /sys/fs/cgroup/my\\040dir rw - cgroup cgroup rw,memory
"""


def test_mountinfo_gives_cpu_v1_and_v2_mounts_with_their_roots() -> None:
    assert cpu_mounts(MOUNTINFO) == [
        Mount(1, "/", Path("/sys/fs/cgroup/cpu")),
        Mount(1, "/docker/abc", Path("/sys/fs/cgroup/cpu,cpuacct")),
        Mount(2, "/", Path("/sys/fs/cgroup/unified")),
    ]


def test_proc_cgroup_gives_the_cpu_and_unified_paths() -> None:
    text = "12:memory:/m\n4:cpu,cpuacct:/docker/abc/x\n2:cpuacct:/y\n0::/user.slice/s\n"
    assert process_cgroups(text) == {1: "/docker/abc/x", 2: "/user.slice/s"}
    assert process_cgroups("0::/\n") == {2: "/"}
    assert process_cgroups("") == {}


def test_quota_files_of_both_versions(tmp_path: Path) -> None:
    (tmp_path / "cpu.cfs_quota_us").write_text("20000\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert quota_of(tmp_path, 1) == pytest.approx(0.2)
    assert quota_of(tmp_path, 2) == pytest.approx(1.5)
    (tmp_path / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert quota_of(tmp_path, 1) is None
    assert quota_of(tmp_path, 2) is None
    assert quota_of(tmp_path / "missing", 1) is None


def test_throttling_counters_of_both_versions(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text(
        "nr_periods 50\nnr_throttled 20\nthrottled_time 1500000000\n"
    )
    t = CpuCgroup(tmp_path, 1, 0.2).throttling()
    assert t is not None and (t.periods, t.throttled, t.throttled_s) == (50, 20, 1.5)
    (tmp_path / "cpu.stat").write_text(
        "usage_usec 9\nuser_usec 5\nsystem_usec 4\nnr_periods 10\nnr_throttled 3\n"
        "throttled_usec 250000\nnr_bursts 0\nburst_usec 0\n"
    )
    t = CpuCgroup(tmp_path, 2, 0.2).throttling()
    assert t is not None and (t.periods, t.throttled, t.throttled_s) == (10, 3, 0.25)
    (tmp_path / "cpu.stat").write_text("usage_usec 9\n")  # v2 without the cpu controller
    assert CpuCgroup(tmp_path, 2, 0.2).throttling() is None


def fake_hierarchy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proc: str) -> Mount:
    root = tmp_path / "cpu"
    leaf = root / "docker" / "abc" / "svc"
    leaf.mkdir(parents=True)
    for folder in (root / "docker" / "abc", leaf):
        (folder / "cpu.cfs_period_us").write_text("100000\n")
        (folder / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "docker" / "abc" / "cpu.cfs_quota_us").write_text("50000\n")
    (tmp_path / "proc" / "42").mkdir(parents=True)
    (tmp_path / "proc" / "42" / "cgroup").write_text(proc)
    monkeypatch.setattr(cgroups, "PROC", tmp_path / "proc")
    return Mount(1, "/", root)


def test_the_nearest_ancestor_with_a_quota_limits(tmp_path: Path, monkeypatch) -> None:
    mount = fake_hierarchy(tmp_path, monkeypatch, "3:cpu,cpuacct:/docker/abc/svc\n")
    found = limiting_cgroup(42, [mount])
    assert found == CpuCgroup(mount.point / "docker" / "abc", 1, 0.5)
    assert limiting_cgroup(43, [mount]) is None  # no such process


def test_a_mount_of_part_of_the_hierarchy_is_read_relative_to_its_root(
    tmp_path: Path, monkeypatch
) -> None:
    # A container sees /docker/abc as the root of its cpu mount.
    mount = fake_hierarchy(tmp_path, monkeypatch, "3:cpu:/docker/abc/svc\n")
    inner = Mount(1, "/docker/abc", mount.point / "docker" / "abc")
    assert limiting_cgroup(42, [inner]) == CpuCgroup(inner.point, 1, 0.5)
    outside = Mount(1, "/other", mount.point)
    assert limiting_cgroup(42, [outside]) is None


def test_no_quota_anywhere_is_none(tmp_path: Path, monkeypatch) -> None:
    mount = fake_hierarchy(tmp_path, monkeypatch, "3:cpu:/docker/abc/svc\n")
    (mount.point / "docker" / "abc" / "cpu.cfs_quota_us").write_text("-1\n")
    assert limiting_cgroup(42, [mount]) is None


_BUSY = "import time\nend = time.time() + 20\nwhile time.time() < end:\n    pass\n"


def test_a_real_cgroup_quota_is_sampled_with_its_throttling() -> None:
    if os.geteuid() != 0:
        pytest.skip("making a cgroup needs root")
    hierarchy = cpu_hierarchy()
    if hierarchy is None:
        pytest.skip("no cgroup hierarchy with the cpu controller is mounted")
    busy = subprocess.Popen([sys.executable, "-c", _BUSY])
    try:
        with CpuQuota(0.2) as quota:
            quota.add([busy.pid])
            assert quota.pids() == [busy.pid]
            target = {"busy": ProcessSelector(pids=(busy.pid,))}
            with ResourceSampler(target, interval_s=0.25) as sampler:
                time.sleep(1.6)
            path = quota.path
        rows = [r for r in sampler.rows() if r["component"] == "busy"]
        assert rows and all(r["cpu_quota_cores"] == pytest.approx(0.2) for r in rows)
        periods = sum(r["cpu_periods"] for r in rows)
        throttled = sum(r["cpu_throttled"] for r in rows)
        assert periods >= 8 and throttled >= periods / 2, rows
        assert sum(r["cpu_throttled_s"] for r in rows) > 0.5
        used = sum(r["cpu_cores"] for r in rows[1:]) / max(len(rows) - 1, 1)
        assert used < 0.3  # a busy loop held to a fifth of a core
        assert path is not None and not path.exists()  # removed, the process moved out first
    finally:
        busy.kill()
        busy.wait()
    host = [r for r in sampler.rows() if r["component"] == "host"]
    assert all(r.get("cpu_quota_cores") is None for r in host)
