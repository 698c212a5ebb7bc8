"""The load engine driven from Python: requests.parquet, interrupting, recovering, the GIL."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from load_helpers import BODY, dead_port, http_server, make_plan

from pinchpoint import _engine
from pinchpoint.load.engine import recover_records, run_steps
from pinchpoint.load.engine_config import engine_config

pytestmark = pytest.mark.timeout(60)

# docs/architecture.md, `requests.parquet`.
DOCUMENTED_COLUMNS = [
    ("req_id", pa.uint64()),
    ("step", pa.uint32()),
    ("users", pa.uint32()),
    ("endpoint", pa.uint16()),
    ("start_us", pa.int64()),
    ("intended_us", pa.int64()),
    ("latency_us", pa.int64()),
    ("service_us", pa.int64()),
    ("status", pa.uint16()),
    ("error", pa.string()),
    ("bytes", pa.uint64()),
    ("user_index", pa.uint32()),
    ("iteration", pa.uint64()),
]


def wait_for(run: _engine.LoadRun, limit_s: float) -> dict:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        summary = run.wait(0.5)
        if summary is not None:
            return summary
    raise AssertionError(f"the run did not end within {limit_s} s")


def test_run_steps_writes_the_documented_requests_parquet(tmp_path: Path) -> None:
    with http_server() as (port, seen):
        plan = make_plan(port, lower=1, upper=2, duration="1s")
        ticks: list[dict] = []
        result = run_steps(plan, "pytest-run.1", tmp_path, on_tick=ticks.append)
        received = seen.count()

    assert not (tmp_path / "requests.arrows").exists()
    assert result.requests_path == tmp_path / "requests.parquet"
    table = pq.read_table(result.requests_path)
    assert [(f.name, f.type) for f in table.schema] == DOCUMENTED_COLUMNS

    summary = result.summary
    assert not result.interrupted and summary["interrupted"] is False
    assert summary["records_error"] is None
    assert table.num_rows == result.rows == summary["records"] > 0
    assert received == summary["records"], "the run waits for requests in flight"
    assert [s["users"] for s in summary["steps"]] == [1, 2]
    assert sum(s["requests"] for s in summary["steps"]) == table.num_rows
    assert len(summary["windows"]) == 2
    assert ticks, "on_tick was called while the run went"

    rows = table.to_pylist()
    for step in summary["steps"]:
        mine = [r for r in rows if r["step"] == step["step"]]
        assert len(mine) == step["requests"] > 0
        assert {r["users"] for r in mine} == {step["users"]}
        assert step["statuses"] == {200: step["requests"]}
        assert step["bytes"] == len(BODY) * step["requests"]
    assert all(r["status"] == 200 and r["error"] is None for r in rows)
    assert len({r["req_id"] for r in rows}) == len(rows)
    assert all("pp_run=pytest-run.1&pp_users=" in p for p in seen.paths)


def test_stopped_run_keeps_what_it_measured(tmp_path: Path) -> None:
    with http_server() as (port, _seen):
        plan = make_plan(port, lower=2, upper=2, duration="60s", think_time="10ms")
        stream = tmp_path / "requests.arrows"
        run = _engine.start(engine_config(plan, "pytest-stop", stream))
        time.sleep(1.0)
        deadline = time.monotonic() + 10  # however late the engine's threads run
        while (live := run.snapshot())["users"] < 2 or live["requests"] == 0:
            assert time.monotonic() < deadline, live
            time.sleep(0.05)
        run.stop()
        stopped_at = time.monotonic()
        summary = wait_for(run, limit_s=10)
        stop_took = time.monotonic() - stopped_at

    assert live["requests"] > 0 and live["users"] == 2
    assert summary["interrupted"] is True
    assert stop_took < 6.0, f"the run took {stop_took:.1f} s to stop"  # not its 60 s
    assert len(summary["windows"]) == 1
    parquet = tmp_path / "requests.parquet"
    rows = _engine.records_to_parquet(str(stream), str(parquet))
    assert rows > 0
    assert rows == summary["records"] == pq.read_metadata(parquet).num_rows


def leftover_stream(run_dir: Path, port: int) -> int:
    """Runs briefly and leaves `requests.arrows` unconverted; returns its records."""
    plan = make_plan(port, lower=1, upper=1, duration="1s", think_time="5ms")
    run = _engine.start(engine_config(plan, "pytest-leftover", run_dir / "requests.arrows"))
    return wait_for(run, limit_s=10)["records"]


def test_recover_records_converts_a_leftover_stream(tmp_path: Path) -> None:
    assert recover_records(tmp_path) is None, "nothing to recover"
    with http_server() as (port, _seen):
        records = leftover_stream(tmp_path, port)
    assert records > 0

    assert recover_records(tmp_path) == records
    assert not (tmp_path / "requests.arrows").exists()
    table = pq.read_table(tmp_path / "requests.parquet")
    assert table.num_rows == records
    assert [(f.name, f.type) for f in table.schema] == DOCUMENTED_COLUMNS


def test_recover_records_of_a_stream_cut_short(tmp_path: Path) -> None:
    with http_server() as (port, _seen):
        records = leftover_stream(tmp_path, port)
    stream = tmp_path / "requests.arrows"
    data = stream.read_bytes()
    stream.write_bytes(data[: len(data) - 100])  # cut in the last batch, as by a kill
    rows = recover_records(tmp_path)
    assert rows is not None and 0 <= rows < records
    assert pq.read_metadata(tmp_path / "requests.parquet").num_rows == rows


def test_wait_releases_the_gil(tmp_path: Path) -> None:
    plan = make_plan(dead_port(), lower=1, upper=1, duration="30s")
    run = _engine.start(engine_config(plan, "pytest-gil", tmp_path / "requests.arrows"))
    count = 0
    done = threading.Event()

    def counter() -> None:
        nonlocal count
        while not done.is_set():
            count += 1

    thread = threading.Thread(target=counter)
    thread.start()
    try:
        time.sleep(0.1)
        # A second of wait at a time; a few tries, as this process may be paused for one.
        for _ in range(5):
            before = count
            t0 = time.monotonic()
            assert run.wait(1.0) is None, "the 30 s run is still going"
            waited = time.monotonic() - t0
            progress = count - before
            assert waited >= 0.9
            if progress > 1_000_000:
                break
    finally:
        done.set()
        thread.join()
        run.stop()
        wait_for(run, limit_s=10)
    # Measured: ~12M steps while wait releases the GIL; a call holding it lets through
    # under 0.1M (only around its edges).
    assert progress > 1_000_000, f"the counting thread made {progress} steps during wait(1.0)"
