"""The summary of a run the engine did not send (load/records_summary.py, load/hdr.py) is
the engine's own: worked out from the records of real engine runs, every count,
percentile, mean and HdrHistogram V2 byte matches what the engine returned."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from load_helpers import dead_port, http_server

from pinchpoint.load.engine import run_steps
from pinchpoint.load.hdr import COUNTS_LEN, Histogram, decode_v2, index_for
from pinchpoint.load.records_summary import step_summaries
from pinchpoint.plan.model import Plan, parse_plan


def _plan(port: int) -> Plan:
    return parse_plan(
        f"""
[target]
url = "http://127.0.0.1:{port}"

[load]
lower = 1
upper = 3
step = 2
duration = "1s"
warmup = "0s"
timeout = "1s"
threads = 2

[[request]]
path = "/a"

[[request]]
path = "/b"
weight = 2
"""
    )


def _same_as_the_engine(plan: Plan, run_dir: Path) -> int:
    result = run_steps(plan, "hdr-1", run_dir)
    mine = step_summaries(pq.read_table(result.requests_path), plan.load.levels())
    theirs = result.summary["steps"]
    assert len(mine) == len(theirs) == 2
    for a, b in zip(mine, theirs, strict=True):
        assert a.keys() == b.keys()
        for key in b:
            if key != "endpoints":
                assert a[key] == b[key], key
        assert len(a["endpoints"]) == len(b["endpoints"]) == 2
        for x, y in zip(a["endpoints"], b["endpoints"], strict=True):
            assert x == y
    return result.rows


def test_answered_requests_give_the_engines_summary_byte_for_byte(tmp_path: Path) -> None:
    with http_server() as (port, _):
        assert _same_as_the_engine(_plan(port), tmp_path) > 50


def test_failed_requests_give_the_engines_summary_byte_for_byte(tmp_path: Path) -> None:
    assert _same_as_the_engine(_plan(dead_port()), tmp_path) > 50


@pytest.mark.parametrize("seed", [1, 2])
def test_the_v2_bytes_decode_to_the_counts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    latencies = np.concatenate(
        [rng.integers(1, 3000, 500), rng.lognormal(9, 2, 2000).astype(np.int64), [0, 10**12]]
    )
    histogram = Histogram.of(latencies)
    counts = decode_v2(histogram.v2())
    assert counts.shape == (COUNTS_LEN,) and counts.sum() == latencies.size
    assert (counts == histogram.counts).all()
    # Values below 2048 µs keep their own bucket: 3 significant digits.
    small = np.arange(1, 2048, dtype=np.int64)
    assert (index_for(small) == small).all()
