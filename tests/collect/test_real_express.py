"""A real Express app logging with morgan (tests/collect/express, its packages installed by
`make system-deps-test`): its lines read by the morgan format and matched by tag, and its
pool an event loop in one process or in each of a cluster's workers."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from collect.served import get, sampled_pool, wait_lines, wait_listening
from pinchpoint.collect.logs.reader import FileCounts, collect_component, mark
from pinchpoint.collect.servers.pool import ASYNC
from pinchpoint.logformats import get_parser
from pinchpoint_lab.ports import end, free_port

APP = Path(__file__).parent / "express"
NODE = shutil.which("node") or "/usr/bin/node"
CUSTOM = ':method :url :status :total-time :date[iso] ":req[x-pinchpoint]"'

pytestmark = pytest.mark.skipif(
    shutil.which(NODE) is None or not (APP / "node_modules" / "morgan").is_dir(),
    reason="node and the fixture's packages are needed (make system-deps-test)",
)


@contextmanager
def express(log: Path, fmt: str, workers: int = 0) -> Iterator[tuple[int, int]]:
    """The app's port and first process's pid, logging to `log` in morgan format `fmt`."""
    port = free_port()
    process = subprocess.Popen(
        [NODE, str(APP / "app.js"), str(port), str(log), fmt, str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_listening(process, port, log, 10)
        yield port, process.pid
    finally:
        end(process)


def _requests(port: int) -> None:
    assert get(port, "/slow?ms=150&pp_run=r1&pp_users=2&pp_req=1") == 200
    assert get(port, "/a?code=503&pp_run=r1&pp_users=4&pp_req=2") == 503
    assert get(port, "/h?code=404", {"X-Pinchpoint": "run=r1; users=4; req=3"}) == 404
    assert get(port, "/x?pp_run=r0&pp_users=2&pp_req=1") == 200
    assert get(port, "/plain") == 200


@pytest.mark.parametrize(("fmt", "by_header"), [(CUSTOM, 1), ("dev", 0)])
def test_real_morgan_lines_are_matched_by_tag(tmp_path: Path, fmt: str, by_header: int) -> None:
    log = tmp_path / "access.log"
    with express(log, fmt) as (port, _):
        assert get(port, "/warm?pp_run=r1&pp_users=2&pp_req=100") == 200  # before the mark
        wait_lines(log, 1)
        position = mark(log)
        started = time.time()
        _requests(port)
        finished = time.time()
        wait_lines(log, 6)

    rows, counts = collect_component("node", log, get_parser("morgan", fmt), "r1", position)

    assert counts == FileCounts(
        component="node", path=str(log), lines=5, matched=2 + by_header, other_run=1,
        untagged=2 - by_header, unparseable=0,
    )  # fmt: skip
    rows.sort(key=lambda row: row.req_id or 0)
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (4, 2, 503),
        (4, 3, 404),
    ][: 2 + by_header]
    assert 0.15 <= rows[0].duration_s < 2  # the route waited 150 ms
    for row in rows:
        assert 0 < row.duration_s < 2
        if fmt == CUSTOM:  # :date[iso], when the response finished
            assert row.ts is not None and started <= row.ts <= finished


def test_real_node_pool_is_one_event_loop_or_one_per_cluster_worker(tmp_path: Path) -> None:
    with express(tmp_path / "one.log", "tiny") as (_, pid):
        row = sampled_pool(pid, workers=0)
    assert (row["pool_kind"], row["pool_slots"], row["pool_source"]) == (
        ASYNC, None, "one process, one event loop",
    )  # fmt: skip
    with express(tmp_path / "two.log", "tiny", workers=2) as (_, pid):
        row = sampled_pool(pid, workers=2)
    assert (row["pool_kind"], row["pool_slots"]) == (ASYNC, None)
    assert "each of its 2 worker processes" in row["pool_source"]
