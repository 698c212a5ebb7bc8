"""Time and peak memory of `pinchpoint analyze` (the verdict and the report) against the
number of requests in a run folder.

Writes a run folder of N generated requests (10 steps of a closed loop, latencies growing
past a knee), in row groups of 131,072 rows across steps, encoded as the engine writes them
(crates/pinchpoint-engine/src/arrow_io.rs: ids, times and latencies delta-packed, no
dictionary), so that writing it holds only one group, and a tiers.parquet of nginx's
record of each request; then runs `pinchpoint analyze` on it
in a child process and reports its wall time and its peak resident memory, also per
million requests.

    .venv/bin/python bench/analysis_scale.py --requests 1000000 5000000 20000000
    .venv/bin/python bench/analysis_scale.py --requests 100000000 --dir /var/tmp

A folder is written under --dir (default: the system's temporary folder) and removed
after; 100 M requests take about 3 GB there, checked before writing.

Memory that grows with the requests means the analysis holds them: the target is memory
set by the steps and endpoints, not by the requests (2 GB and 60 s for 100 M).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import TIERS_SCHEMA

STEPS = 10
# Rows per row group, across steps: the engine's.
GROUP = files.REQUESTS_ROW_GROUP
# Bytes of requests.parquet and tiers.parquet per request, with room to spare (about 5 and
# 14 are written).
BYTES_PER_REQUEST = 30
# Columns the engine writes delta-packed, without a dictionary.
DELTA = ["req_id", "start_us", "intended_us", "latency_us", "service_us"]
T0_US = 1_800_000_000_000_000
PLAN = """[target]
url = "http://127.0.0.1:9"

[load]
lower = 1
upper = 10
step = 1
duration = "{seconds}s"
warmup = "0.5s"

[[request]]
path = "/"

[[component]]
name = "nginx"
role = "proxy"
"""


def tier_records(requests: pa.Table) -> pa.Table:
    """What nginx in front of the app logs of the requests: a record each, tagged with the
    request's id, its time and the upstream's."""
    n = requests.num_rows
    latency = requests["latency_us"].to_numpy()
    sent = requests["start_us"].to_numpy()
    return pa.table(
        {
            "component": pa.array(["nginx"] * n).dictionary_encode().cast(pa.string()),
            "users": requests["users"], "req_id": requests["req_id"],
            "ts": (sent + latency) / 1e6, "duration_s": latency * 0.95 / 1e6,
            "upstream_s": latency * 0.9 / 1e6, "status": np.full(n, 200, np.int32),
            "queue_s": pa.nulls(n, pa.float64()), "span_kind": pa.nulls(n, pa.string()),
            "parent": pa.nulls(n, pa.string()),
        },
        schema=TIERS_SCHEMA,
    )  # fmt: skip


def write_run(folder: Path, requests: int) -> None:
    per_step = requests // STEPS
    seconds = max(per_step / 50_000, 1.0)  # 50k req/s
    folder.mkdir(parents=True)
    (folder / "plan.toml").write_text(PLAN.format(seconds=seconds))
    rng = np.random.default_rng(7)
    schema = pa.schema(
        [
            ("req_id", pa.uint64()), ("step", pa.uint32()), ("users", pa.uint32()),
            ("endpoint", pa.uint16()), ("start_us", pa.int64()), ("intended_us", pa.int64()),
            ("latency_us", pa.int64()), ("service_us", pa.int64()), ("status", pa.uint16()),
            ("error", pa.string()), ("bytes", pa.uint64()),
        ]
    )  # fmt: skip
    steps = []
    tiers = pq.ParquetWriter(folder / "tiers.parquet", TIERS_SCHEMA, compression="snappy")
    with (
        tiers,
        pq.ParquetWriter(
            folder / "requests.parquet",
            schema,
            compression="snappy",
            use_dictionary=[c for c in schema.names if c not in DELTA],
            column_encoding=dict.fromkeys(DELTA, "DELTA_BINARY_PACKED"),
        ) as writer,
    ):
        pending: list[pa.Table] = []

        def flush(least: int) -> None:
            while sum(t.num_rows for t in pending) >= max(least, 1):
                whole = pa.concat_tables(pending)
                writer.write_table(whole.slice(0, GROUP), row_group_size=GROUP)
                rest = whole.slice(GROUP)
                pending[:] = [rest] if rest.num_rows else []

        for step in range(STEPS):
            start = T0_US + int(step * seconds * 1e6)
            steps.append(
                {
                    "step": step,
                    "users": step + 1,
                    "start": start / 1e6,
                    "end": start / 1e6 + seconds,
                }
            )
            base_ms = 2.0 * max(1.0, (step + 1) / 5)  # flat, then growing past 5 users
            for first in range(0, per_step, GROUP):
                n = min(GROUP, per_step - first)
                ids = np.arange(
                    step * per_step + first, step * per_step + first + n, dtype=np.uint64
                )
                sent = start + (np.arange(first, first + n) * (seconds * 1e6 / per_step)).astype(
                    np.int64
                )
                sent += rng.integers(0, 20, n)  # a send is never quite on time
                latency = (rng.gamma(4.0, base_ms / 4.0, n) * 1000).astype(np.int64)
                table = pa.table(
                    {
                        "req_id": ids, "step": np.full(n, step, np.uint32),
                        "users": np.full(n, step + 1, np.uint32), "endpoint": np.zeros(n, np.uint16),
                        "start_us": sent, "intended_us": sent, "latency_us": latency,
                        "service_us": latency, "status": np.full(n, 200, np.uint16),
                        "error": pa.nulls(n, pa.string()), "bytes": np.full(n, 512, np.uint64),
                    },
                    schema=schema,
                )  # fmt: skip
                pending.append(table)
                flush(GROUP)
                tiers.write_table(tier_records(table), row_group_size=GROUP)
        flush(1)
    run = {
        "run_id": folder.name, "started": steps[0]["start"], "ended": steps[-1]["end"],
        "interrupted": False, "warmup_s": 0.5, "steps": steps, "records": per_step * STEPS,
        "engine": {"threads": 1}, "host": {"cpu_count": 2},
    }  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run))


def analyze(folder: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `pinchpoint analyze` on the folder."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "analyze", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        print("note: the peak is an earlier child's; run one size per invocation to be sure")
    return took, peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write the run folders (needs room)"
    )
    args = parser.parse_args()
    where = args.dir or Path(tempfile.gettempdir())
    need = max(args.requests) * BYTES_PER_REQUEST
    free = shutil.disk_usage(where).free
    if free < need:
        raise SystemExit(f"{where}: {free / 1e9:.1f} GB free, {need / 1e9:.1f} GB needed")
    print(
        f"{'requests':>12} {'file MB':>8} {'analyze s':>10} {'peak MB':>9}"
        f" {'MB per M requests':>18}"
    )
    for count in sorted(args.requests):
        with tempfile.TemporaryDirectory(prefix="pinchpoint-scale-", dir=where) as tmp:
            folder = Path(tmp) / "20261125-000000-scal"
            write_run(folder, count)
            size_mb = (folder / "requests.parquet").stat().st_size / 1e6
            took, peak_mb = analyze(folder)
            print(
                f"{count:>12,} {size_mb:>8.0f} {took:>10.1f} {peak_mb:>9.0f}"
                f" {peak_mb / (count / 1e6):>18.1f}"
            )


if __name__ == "__main__":
    main()
