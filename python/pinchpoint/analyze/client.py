"""What the client saw in a step's steady part: requests, errors by class, throughput,
bytes and latency percentiles, from the requests' digest (`rundir.digest`)."""

from __future__ import annotations

from typing import Any

import polars as pl

from pinchpoint.rundir.digest import ANSWER, FAILED, OK, Digest
from pinchpoint.rundir.scan import Frame, collect, columns, lazy
from pinchpoint.rundir.steady import Window, in_window

# Percentiles of the client's latency and of each tier's time and self time per step.
PERCENTILES = (50, 90, 95, 99, 99.9)


def answered(requests: Frame) -> Frame:
    """The requests that got a response below 400."""
    return requests.filter(OK)


def min_latency(digest: Digest) -> float | None:
    """The shortest latency of an answered request, in ms."""
    value = digest.where(OK).min_us()
    return value / 1000 if value is not None else None


def min_latency_ms(requests: Frame) -> float | None:
    """The shortest latency of an answered request of `requests`, in ms."""
    return min_latency(Digest.of(requests))


def _ms(value: float | None) -> float | None:
    return value / 1000 if value is not None else None


def client_numbers(part: Digest, w: Window) -> dict[str, Any]:
    """The client's view of one step from the digest of its steady part. A request belongs
    by its intended send time (open loop: one sent late because the target stalled still
    counts in its phase, with its latency from that time)."""
    ok = part.where(OK)
    errors = part.where(FAILED)
    # Latencies of the successful answers; with none, of every answer (a step that only
    # got 503s); never of transport errors: they had no response to time.
    answers = ok if ok.count() else part.where(ANSWER)
    requests, failed = part.count(), errors.count()
    latency = answers.percentiles_us(PERCENTILES)
    return {
        "step": w.step,
        "users": w.users,
        "kind": w.kind,
        "level": w.level,
        **({"late": w.late, "unsent": w.unsent} if w.kind == "rate" else {}),
        "duration_s": round(w.seconds, 3),
        "requests": requests,
        "errors": failed,
        "error_rate": failed / requests if requests else 0.0,
        "errors_by_class": part.by_class(),
        "throughput_rps": ok.count() / w.seconds,
        # Response bytes the client received per second: what the path to it carried.
        "bytes_per_s": float(part.total("bytes")) / w.seconds if "bytes" in part.source else 0.0,
        "latency_ms": {f"p{q:g}": _ms(v) for q, v in zip(PERCENTILES, latency, strict=True)},
        "latency_mean_ms": _ms(answers.mean_us()),
        # How long the failed requests took: a limit that refuses answers fast.
        "error_latency_p50_ms": _ms(errors.percentiles_us([50])[0]),
    }


def client_step(requests: Frame, w: Window) -> tuple[dict[str, Any], pl.Series]:
    """The client's view of one step of `requests`, and the request ids kept in its steady
    part (a table small enough to list them: a knee search's level, a test's)."""
    step = client_numbers(Digest.of(requests, [w]).where(pl.col("window") == 0), w)
    if "req_id" not in columns(requests):
        return step, pl.Series("req_id", [], pl.UInt64)
    return step, collect(in_window(lazy(requests), w).select("req_id"))["req_id"]
