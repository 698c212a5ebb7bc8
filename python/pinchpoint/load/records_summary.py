"""The engine's per-step counts and histograms, worked out from the records of a run the
engine did not send (a locustfile's): the `steps` of the summary `run_steps` returns,
with the same keys, numbers and HdrHistogram bytes (crates/pinchpoint-py `step_dict`).

Per step: `requests`, `responses` (an answer, whatever its status), `bytes`, `errors` by
class, `statuses` of the answers, the latencies of the answers (percentiles, min, max,
mean, `hdr_v2`), and the same per endpoint index and per kind of record (`request` alone
here) with `failed` (an error or a status of 400 or more).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pinchpoint import _engine
from pinchpoint.load.hdr import Histogram
from pinchpoint.plan.load_models import Level


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def step_summaries(table: pa.Table, levels: Sequence[Level]) -> list[dict]:
    """One entry per closed-loop step of the plan, from a table of requests.parquet's
    columns; a step that did not run has zero counts."""
    step = _column(table, "step").astype(np.int64)
    endpoint = _column(table, "endpoint").astype(np.int64)
    latency = _column(table, "latency_us").astype(np.int64)
    status = _column(table, "status").astype(np.int64)
    size = _column(table, "bytes").astype(np.uint64)
    error = np.array(table.column("error").to_pylist(), dtype=object)
    answered = np.array([e is None for e in error], dtype=bool)
    out = []
    for level in levels:
        mine = step == level.index
        ok = mine & answered
        entry: dict = {
            "step": level.index,
            "users": level.users,
            "kind": level.kind,
            "level": level.level,
            "intended": 0,
            "late": 0,
            "unsent": 0,
            "requests": int(mine.sum()),
            "responses": int(ok.sum()),
            "bytes": int(size[mine].sum()),
            "errors": _errors(error[mine & ~answered]),
            "statuses": _counts(status[ok]),
        }
        entry.update(Histogram.of(latency[ok]).latency_items())
        endpoints = []
        if mine.any():
            for index in range(int(endpoint[mine].max()) + 1):
                at = mine & (endpoint == index)
                failed = at & (~answered | (status >= 400))
                item = {"endpoint": index, "requests": int(at.sum()), "failed": int(failed.sum())}
                item.update(Histogram.of(latency[at & answered]).latency_items())
                endpoints.append(item)
        entry["endpoints"] = endpoints
        # A locustfile's records are all HTTP requests, as the engine counts kinds.
        entry["kinds"] = {}
        if mine.any():
            failed = mine & (~answered | (status >= 400))
            kind = {"requests": int(mine.sum()), "failed": int(failed.sum())}
            kind.update(Histogram.of(latency[ok]).latency_items())
            entry["kinds"] = {"request": kind}
        out.append(entry)
    return out


def _errors(classes: np.ndarray) -> dict[str, int]:
    found = Counter(classes.tolist())
    return {c: found[c] for c in _engine.ERROR_CLASSES if c in found}


def _counts(values: np.ndarray) -> dict[int, int]:
    codes, counts = np.unique(values, return_counts=True)
    return {int(c): int(n) for c, n in zip(codes, counts, strict=True)}
