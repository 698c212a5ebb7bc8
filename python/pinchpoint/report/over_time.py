"""The requests over the run's time as the report draws them, each computed by a streaming
pass over the requests: latencies in time buckets (at most `TIME_POINTS` of them), and a
bounded, deterministic sample of requests to draw as points (the errors and each step's
slowest 1% first). What they hold is set by the buckets and the sample, not by the run."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from pinchpoint.rundir.digest import OK, Digest, latency_bucket, percentiles
from pinchpoint.rundir.scan import Frame, collect, columns, height, lazy, schema
from pinchpoint.rundir.tier_sample import hash_below

MAX_POINTS = 20_000
# Time buckets of a chart over the run: at most this many, each a round number of seconds.
TIME_POINTS = 1_000
WIDTHS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)
# Latency buckets of a time bucket: a chart's percentile within 1%.
CHART_SHARE = 0.01
# A request among its step's slowest this share is kept in the sample before others.
TAIL = 0.99


def bucket_width(span_s: float | None) -> float:
    """Seconds per time bucket: the roundest width that cuts `span_s` into at most
    TIME_POINTS buckets (1 s without a span)."""
    if span_s is None or not math.isfinite(span_s) or span_s <= 0:
        return 1.0
    for width in WIDTHS_S:
        if span_s / width <= TIME_POINTS:
            return float(width)
    return float(math.ceil(span_s / TIME_POINTS))


def time_bucket(t0: float, width: float) -> pl.Expr:
    """Each request's time bucket by its send time: floor((sent - t0) / width)."""
    return ((pl.col("start_us") / 1e6 - t0) / width).floor().cast(pl.Int64)


def extent_s(requests: Frame) -> tuple[float, float] | None:
    """The first send and the last answer of the requests, in unix seconds."""
    if "start_us" not in columns(requests) or height(requests) == 0:
        return None
    start, lat = pl.col("start_us").cast(pl.Int64), pl.col("latency_us").cast(pl.Int64)
    ends = lazy(requests).select(start.min().alias("first"), (start + lat).max().alias("last"))
    first, last = collect(ends).row(0)
    if first is None or last is None:
        return None
    return float(first) / 1e6, float(last) / 1e6


@dataclass(frozen=True)
class Timeline:
    """The latencies per time bucket (`rows`: `t` bucket, `step`, `ok`, `transport`, latency
    `bucket`, `n`, `lo_us`, `hi_us`, `users`) and the bucket's width in seconds."""

    rows: pl.DataFrame
    width: float

    @staticmethod
    def of(requests: Frame, t0: float, width: float) -> Timeline:
        ok = OK.fill_null(False)
        lat = pl.col("latency_us").cast(pl.Int64)
        query = (
            lazy(requests)
            .group_by(
                time_bucket(t0, width).alias("t"),
                "step",
                ok.alias("ok"),
                pl.col("error").is_not_null().alias("transport"),
                latency_bucket(CHART_SHARE).alias("bucket"),
            )
            .agg(
                pl.len().cast(pl.Int64).alias("n"),
                lat.min().alias("lo_us"),
                lat.max().alias("hi_us"),
                pl.col("users").min().alias("users"),
            )
        )
        return Timeline(collect(query), width)

    def lines(self, qs: tuple[float, ...]) -> pl.DataFrame:
        """Per time bucket of successful responses: its middle `t` (seconds from t0), their
        count `n`, least `users` and their latency percentiles `qs` in ms (`p<q>`)."""
        ok = self.rows.filter(pl.col("ok"))
        merged = (
            ok.group_by("t", "bucket")
            .agg(pl.col("n").sum(), pl.col("lo_us").min(), pl.col("hi_us").max())
            .sort("t", "bucket")
        )
        out = ok.group_by("t").agg(pl.col("n").sum(), pl.col("users").min()).sort("t")
        t, n = merged["t"].to_numpy(), merged["n"].to_numpy()
        lo, hi = merged["lo_us"].to_numpy(), merged["hi_us"].to_numpy()
        cuts = [0, *(np.flatnonzero(np.diff(t)) + 1).tolist(), len(t)] if len(t) else [0]
        values = [percentiles(n[a:b], lo[a:b], hi[a:b], qs) for a, b in itertools.pairwise(cuts)]
        return out.with_columns(
            ((pl.col("t") + 0.5) * self.width).alias("t"),
            *(
                pl.Series(f"p{q:g}", [_ms(v[i]) for v in values], pl.Float64)
                for i, q in enumerate(qs)
            ),
        )


def _ms(us: float | None) -> float | None:
    return us / 1000 if us is not None else None


def _merged(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of the same latency bucket summed, in the buckets' order."""
    return (
        rows.group_by("bucket")
        .agg(pl.col("n").sum(), pl.col("lo_us").min(), pl.col("hi_us").max())
        .sort("bucket")
    )


@dataclass(frozen=True)
class Tails:
    """Each step's latency from which a request is among its slowest 1%, and how many
    requests are rare (a transport error, or among those slowest)."""

    from_us: dict[int, int]
    rare: int
    total: int

    @staticmethod
    def of(rows: pl.DataFrame) -> Tails:
        """From buckets of requests (`step`, `transport`, `bucket`, `n`, `lo_us`): the
        bucket holding the rank of the 99th percentile ("higher") starts the tail; every
        latency of it and the buckets above is at least its shortest."""
        from_us: dict[int, int] = {}
        rare = 0
        for (step,), part in rows.group_by("step"):
            merged = _merged(part)
            counts = merged["n"].to_numpy()
            total = int(counts.sum())
            if total == 0 or step is None:
                continue
            rank = math.ceil(TAIL * (total - 1))
            i = int(np.searchsorted(np.cumsum(counts), rank, side="right"))
            bucket, lo = merged["bucket"][i], merged["lo_us"][i]
            from_us[int(step)] = int(lo)
            slow = (~pl.col("transport")) & (pl.col("bucket") >= bucket)
            rare += int(part.filter(pl.col("transport") | slow)["n"].sum())
        return Tails(from_us, rare, int(rows["n"].sum()) if rows.height else 0)

    @staticmethod
    def of_requests(requests: Frame) -> Tails:
        digest = Digest.of(requests).rows
        if digest.is_empty():
            return Tails({}, 0, 0)
        return Tails.of(digest.with_columns(pl.col("error").is_not_null().alias("transport")))


def _share(wanted: int, among: int) -> float:
    """The share of `among` to draw so that at least `wanted` come out, but for a chance
    in some ten thousand."""
    if among <= 0:
        return 1.0
    return min(1.0, (wanted + 4 * math.sqrt(wanted) + 10) / among)


def _below(share: float) -> pl.Expr:
    """The requests whose hash falls in the first `share` of its range."""
    return hash_below(pl.col("_h"), share)


def sample_requests(
    requests: Frame, limit: int = MAX_POINTS, seed: int = 0, tails: Tails | None = None
) -> tuple[pl.DataFrame, str]:
    """At most `limit` rows: errors and each step's slowest 1% first, then a uniform sample;
    chosen by a hash of the request id (its send time without one), so the same run gives
    the same points. `tails` (from the caller's own pass) saves a pass.

    Returns the rows and a note saying what was kept."""
    total = height(requests)
    if total <= limit:
        return collect(lazy(requests)), f"all {total:,} requests"
    tails = tails if tails is not None else Tails.of_requests(requests)
    half = limit // 2
    keep_rare = min(tails.rare, half)
    room = min(limit - keep_rare, total - tails.rare)
    shares = [_share(half, tails.rare), _share(room, total - tails.rare)]
    names = columns(requests)
    key = "req_id" if "req_id" in names else "start_us"
    steps = pl.DataFrame({"step": list(tails.from_us), "_tail": list(tails.from_us.values())})
    steps = steps.with_columns(pl.col("step").cast(schema(requests)["step"]))
    marked = (
        lazy(requests)
        .join(steps.lazy(), on="step", how="left")
        .with_columns(
            (pl.col("error").is_not_null() | (pl.col("latency_us") >= pl.col("_tail")))
            .fill_null(False)
            .alias("_rare"),
            pl.col(key).hash(seed).alias("_h"),
        )
        .drop("_tail")
    )
    for _ in range(4):
        drawn = collect(
            marked.filter(
                pl.when(pl.col("_rare")).then(_below(shares[0])).otherwise(_below(shares[1]))
            )
        )
        rare = drawn.filter(pl.col("_rare")).sort("_h").head(half)
        common = drawn.filter(~pl.col("_rare")).sort("_h").head(limit - rare.height)
        if rare.height >= keep_rare and common.height >= room:
            break
        shares = [min(1.0, 2 * s) for s in shares]  # short by bad luck: draw more
    chosen = pl.concat([rare, common]).sort("start_us", "_h").drop("_rare", "_h")
    if tails.rare > half:
        kept = "sampled"
    else:
        kept = "every error and each step's slowest 1% kept, the rest sampled"
    return chosen, f"{chosen.height:,} of {total:,} requests ({kept})"
