"""Link ceilings in the host rows: real shaped veth links in network namespaces."""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pinchpoint.collect.resources.links import COLUMNS, LinkReader
from pinchpoint.collect.resources.sampler import ResourceSampler, conform
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA
from pinchpoint_lab.netns import ShapedLink

RATE = 2_000_000
PORT = 8766
needs_netns = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None,
    reason="needs root, ip and tc",
)
# Times shaped links: one at a time, beside the parallel part.
pytestmark = [pytest.mark.timed, pytest.mark.timeout(90)]

# Sends argv[3] bytes to the first connection, then exits.
_SENDER = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
conn, _ = server.accept()
block, left = bytes(1 << 16), int(sys.argv[3])
while left > 0:
    left -= conn.send(block[:left])
conn.close()
"""


@contextmanager
def downloading(link: ShapedLink, size: int) -> Iterator[threading.Thread]:
    """A sender in the namespace and a thread reading `size` bytes from it in this one."""
    sender = link.popen(
        [sys.executable, "-c", _SENDER, link.ns_address, str(PORT), str(size)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert sender.stdout is not None and sender.stdout.readline().strip() == "ready"

    def receive() -> None:
        with socket.create_connection((link.ns_address, PORT), timeout=30) as conn:
            while conn.recv(1 << 16):
                pass

    reader = threading.Thread(target=receive, daemon=True)
    reader.start()
    try:
        yield reader
    finally:
        reader.join(timeout=30)
        sender.kill()
        sender.wait(timeout=10)


@needs_netns
def test_host_rows_name_the_shaped_veth_at_its_ceiling(tmp_path: Path) -> None:
    with ShapedLink(RATE) as link:
        sampler = ResourceSampler({}, interval_s=0.5)
        with downloading(link, 3 * RATE) as reader, sampler:
            reader.join(timeout=30)
        path = sampler.write(tmp_path)
    host = [row for row in pq.read_table(path).to_pylist() if row["component"] == "host"]
    busy = [row for row in host if (row["net_util"] or 0) > 0.8]
    assert len(busy) >= 3, [row["net_util"] for row in host]
    for row in busy:
        assert row["net_util"] < 1.2
        assert row["net_link"] == link.link
        assert row["net_link_limit_bytes_s"] == RATE
        assert abs(row["net_link_bytes_s"] - RATE) / RATE < 0.2
        assert row["net_qdisc_backlog_bytes"] is not None
    assert all(row["net_qdisc_overlimits_s"] is not None for row in busy[1:])
    assert max(row["net_qdisc_overlimits_s"] or 0 for row in busy) > 0


@needs_netns
def test_an_htb_ceiling_is_the_sum_of_its_root_classes(tmp_path: Path) -> None:
    with ShapedLink(4 * RATE) as link:
        tc = ["tc", "-n", link.netns]
        dev = ["dev", link.ns_if]
        subprocess.run([*tc, "qdisc", "del", *dev, "root"], check=True)
        subprocess.run([*tc, "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "10"])
        for classid, rate in (("1:1", RATE // 2), ("1:2", RATE // 2)):
            rate_bit = f"{rate * 8}bit"
            add = [*tc, "class", "add", *dev, "parent", "1:", "classid", classid, "htb"]
            subprocess.run([*add, "rate", rate_bit, "ceil", rate_bit], check=True)
        add = [*tc, "class", "add", *dev, "parent", "1:1", "classid", "1:10", "htb"]
        subprocess.run([*add, "rate", "1mbit", "ceil", f"{RATE * 4}bit"], check=True)
        reader = LinkReader()
        with downloading(link, RATE) as receiving:
            before = time.monotonic()
            reader.read({}, 1.0)
            time.sleep(1.0)
            out = reader.read({}, time.monotonic() - before)
            receiving.join(timeout=30)
    assert out["net_link"] == link.link
    assert out["net_link_limit_bytes_s"] == RATE
    # Only class 1:1's half of the ceiling is used: all traffic goes to its child 1:10.
    assert 0.35 < out["net_util"] < 0.65


def test_a_link_speed_is_its_ceiling_both_ways(tmp_path: Path) -> None:
    sys_net = tmp_path / "net"
    for name, mbit in (("eth7", "1000"), ("eth8", "100"), ("wlan9", "-1")):
        (sys_net / name).mkdir(parents=True)
        (sys_net / name / "speed").write_text(f"{mbit}\n")
    reader = LinkReader(netns_dir=tmp_path / "none", sys_class_net=sys_net)
    assert reader.read({"eth7": (0, 0), "eth8": (0, 0), "wlan9": (0, 0)}, 1.0) == dict.fromkeys(
        COLUMNS
    )
    counters = {"eth7": (50_000_000, 0), "eth8": (0, 10_000_000), "wlan9": (0, 10**9)}
    out = reader.read(counters, 2.0)
    assert out["net_link"] == "eth8"  # 5 MB/s of 12.5 MB/s; eth7 at 25 of 125
    assert out["net_util"] == pytest.approx(0.4)
    assert out["net_link_bytes_s"] == 5_000_000
    assert out["net_link_limit_bytes_s"] == 12_500_000


def test_a_table_without_the_link_columns_reads_as_nulls() -> None:
    first = {"ts": [1.0], "component": ["host"], "cpu_cores": [0.5], "rss_bytes": [1]}
    old = pa.table({**first, "processes": pa.array([2], pa.int32()), "net_util": [0.3]})
    table = conform(old)
    assert table.schema == RESOURCES_SCHEMA
    row = table.to_pylist()[0]
    assert row["net_util"] == 0.3
    assert row["net_link"] is None and row["net_qdisc_drops_s"] is None
