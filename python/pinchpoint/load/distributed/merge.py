"""The generators' results as one run's: their engine summaries merged into the summary
`pipeline.execute` reads (counts summed per step, HdrHistograms added, each step's window
from the earliest start to the latest end, error reasons unioned), their live counters
into one, and their Parquet files into one `requests.parquet`, a batch at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pinchpoint.load.hdr import COUNTS_LEN, Histogram, decode_v2
from pinchpoint.load.send_lag import merged_send_lag
from pinchpoint.plan.model import Level

# Distinct reasons kept per class of error, as the engine keeps them.
REASONS_PER_CLASS = 3
# Rows per batch copied from a generator's Parquet file into the run's.
BATCH_ROWS = 65_536
_SUMMED = ("requests", "responses", "bytes", "intended", "late", "unsent")


def merge_summaries(summaries: Sequence[dict[str, Any]], levels: Sequence[Level]) -> dict:
    """One summary of the generators' summaries; each step's `users` and `level` are the
    run's (`levels`), not a generator's share."""
    steps = [
        _merge_step([s["steps"][i] for s in summaries if i < len(s["steps"])], i, levels[i])
        for i in range(max(len(s["steps"]) for s in summaries))
    ]
    windows = []
    for i in range(max(len(s["windows"]) for s in summaries)):
        mine = [s["windows"][i] for s in summaries if i < len(s["windows"])]
        windows.append((min(a for a, _ in mine), max(b for _, b in mine)))
    errors = [s["records_error"] for s in summaries if s.get("records_error")]
    stopped = [s["stopped"] for s in summaries if s.get("stopped")]
    return {
        "steps": steps,
        "windows": windows,
        "records": sum(s["records"] for s in summaries),
        "interrupted": any(s["interrupted"] for s in summaries),
        "started_us": min(s["started_us"] for s in summaries),
        "ended_us": max(s["ended_us"] for s in summaries),
        "records_error": "; ".join(errors) if errors else None,
        "error_reasons": merge_reasons([s.get("error_reasons") or {} for s in summaries]),
        "abandoned": sum(s.get("abandoned", 0) for s in summaries),
        # Every generator runs the same plan: its endpoints have the same kinds.
        "endpoint_kinds": summaries[0].get("endpoint_kinds") or [],
        **({"stopped": "; ".join(stopped)} if stopped else {}),
    }


def _merge_step(parts: list[dict], index: int, level: Level) -> dict:
    first = parts[0]
    out: dict[str, Any] = {"step": index, "users": level.users if level.kind == "users" else 0}
    if "kind" in first:
        out["kind"] = first["kind"]
        out["level"] = level.level
    for key in _SUMMED:
        if key in first:
            out[key] = sum(p.get(key, 0) for p in parts)
    out["errors"] = _sum_counts([p["errors"] for p in parts])
    out["statuses"] = _sum_counts([p["statuses"] for p in parts])
    out.update(merge_latency(parts))
    out.update(merged_send_lag(parts))
    endpoints = []
    for e in range(max(len(p["endpoints"]) for p in parts)):
        mine = [p["endpoints"][e] for p in parts if e < len(p["endpoints"])]
        endpoints.append(
            {
                "endpoint": e,
                "requests": sum(m["requests"] for m in mine),
                "failed": sum(m["failed"] for m in mine),
                **merge_latency(mine),
            }
        )
    out["endpoints"] = endpoints
    kinds = {}
    for kind in dict.fromkeys(k for p in parts for k in p.get("kinds", {})):
        mine = [p["kinds"][kind] for p in parts if kind in p.get("kinds", {})]
        kinds[kind] = {
            "requests": sum(m["requests"] for m in mine),
            "failed": sum(m["failed"] for m in mine),
            **merge_latency(mine),
        }
    out["kinds"] = kinds
    return out


def _sum_counts(counts: list[dict]) -> dict:
    out: dict = {}
    for c in counts:
        for key, n in c.items():
            out[key] = out.get(key, 0) + n
    return dict(sorted(out.items()))


def merge_latency(parts: Sequence[dict]) -> dict:
    """The latency items (`percentiles_us`, `min_us`, `max_us`, `mean_us`, `hdr_v2`) of
    the histograms of `parts` added together."""
    counts = np.zeros(COUNTS_LEN, dtype=np.int64)
    for p in parts:
        counts += decode_v2(p["hdr_v2"])
    filled = [p for p in parts if "min_us" in p]
    total = int(counts.sum())
    low = min((int(p["min_us"]) for p in filled), default=0)
    high = max((int(p["max_us"]) for p in filled), default=0)
    return Histogram(counts, total, low, high).latency_items()


def merge_reasons(reasons: Sequence[dict[str, list[str]]]) -> dict[str, list[str]]:
    """Per class, the first distinct reasons of all generators (the engine keeps 3)."""
    out: dict[str, list[str]] = {}
    for by_class in reasons:
        for name, messages in by_class.items():
            kept = out.setdefault(name, [])
            for m in messages:
                if m not in kept and len(kept) < REASONS_PER_CLASS:
                    kept.append(m)
    return out


def merge_snapshots(snapshots: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The generators' live counters as one run's: counts summed, the furthest step, the
    users and levels summed, the window's percentiles weighted by its requests (p50) or
    the worst (p99)."""
    out: dict[str, Any] = {"kind": snapshots[0]["kind"]}
    for key in ("requests", "errors", "users", "latency_sum_us", "late", "window_requests"):
        out[key] = sum(s.get(key, 0) for s in snapshots)
    out["step"] = max(s["step"] for s in snapshots)
    out["level"] = sum(s.get("level", 0.0) for s in snapshots)
    seen = [s for s in snapshots if s.get("window_requests") and "window_p50_us" in s]
    if seen:
        n = sum(s["window_requests"] for s in seen)
        out["window_p50_us"] = round(
            sum(s["window_p50_us"] * s["window_requests"] for s in seen) / n
        )
        out["window_p99_us"] = max(s["window_p99_us"] for s in seen)
    out["errors_by_class"] = _sum_counts([s.get("errors_by_class") or {} for s in snapshots])
    out["by_kind"] = {}
    for kind in dict.fromkeys(k for s in snapshots for k in s.get("by_kind") or {}):
        mine = [s["by_kind"][kind] for s in snapshots if kind in (s.get("by_kind") or {})]
        out["by_kind"][kind] = {key: sum(m[key] for m in mine) for key in ("requests", "errors")}
    windows = [s["window_hdr_v2"] for s in snapshots if s.get("window_hdr_v2")]
    if windows:
        counts = sum((decode_v2(bytes(w)) for w in windows), np.zeros(COUNTS_LEN, np.int64))
        out["window_hdr_v2"] = Histogram.of_counts(counts).v2()
    out["endpoints"] = _merge_live_endpoints([s.get("endpoints") or [] for s in snapshots])
    return out


def _merge_live_endpoints(lists: Sequence[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each request's live counts summed over the generators, their windows added."""
    out = []
    for e in range(max((len(one) for one in lists), default=0)):
        mine = [one[e] for one in lists if e < len(one)]
        merged: dict[str, Any] = {
            "requests": sum(m["requests"] for m in mine),
            "errors": sum(m["errors"] for m in mine),
        }
        windows = [m["window_hdr_v2"] for m in mine if m.get("window_hdr_v2")]
        if windows:
            counts = sum((decode_v2(bytes(w)) for w in windows), np.zeros(COUNTS_LEN, np.int64))
            merged["window_hdr_v2"] = Histogram.of_counts(counts).v2()
        out.append(merged)
    return out


def merge_parquet(parts: Sequence[Path], out: Path) -> int:
    """Writes the rows of every part into `out`, a batch at a time; returns the rows."""
    import pyarrow.parquet as pq

    rows = 0
    writer = None
    try:
        for part in parts:
            source = pq.ParquetFile(part)
            if writer is None:
                writer = pq.ParquetWriter(out, source.schema_arrow, compression="snappy")
            for batch in source.iter_batches(batch_size=BATCH_ROWS):
                writer.write_batch(batch)
                rows += batch.num_rows
            source.close()
    finally:
        if writer is not None:
            writer.close()
    return rows
