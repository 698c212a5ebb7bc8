"""The locks a database's backends waited for: per table, lock and pair of statements
(the one that waits, the one at the head of the chain that holds it), the share of the
sampled backends in a transaction that waited so.

A backend in a transaction is one sampled in any state but `idle`: running a statement,
waiting for a lock, or idle inside its transaction (a holder of a row often is: its
UPDATE done, it works before it commits). A lock seen in pg_stat_activity but gone from
pg_locks a moment later has no mode in its sample: it takes the mode most often seen for
the same type of lock on the same table, and where its table is gone too, the table and
mode most often seen for its type.
"""

from __future__ import annotations

from typing import Any

import polars as pl

TOP = 5
KEY = ["lock_relation", "lock_type", "lock_mode", "statement", "blocker_statement"]


def in_transaction(activity: pl.DataFrame) -> pl.DataFrame:
    """The backends sampled inside a transaction (any state but idle)."""
    return activity.filter(pl.col("state").is_not_null() & (pl.col("state") != "idle"))


def _with_modes(waits: pl.DataFrame) -> pl.DataFrame:
    """The waits, a missing mode filled with the one most seen for its type and table, and
    a missing table and mode with the pair most seen for its type."""
    known = waits.filter(pl.col("lock_mode").is_not_null())
    seen = _most_seen(known, ["lock_type", "lock_relation"], "lock_mode")
    joined = waits.join(seen, on=["lock_type", "lock_relation"], how="left", nulls_equal=True)
    waits = joined.with_columns(pl.coalesce("lock_mode", "usual_lock_mode").alias("lock_mode"))
    waits = waits.drop("usual_lock_mode")
    pairs = _most_seen(known.filter(pl.col("lock_relation").is_not_null()), ["lock_type"], "pair")
    gone = pl.col("lock_relation").is_null() & pl.col("lock_mode").is_null()
    return (
        waits.join(pairs, on="lock_type", how="left")
        .with_columns(
            pl.when(gone & pl.col("usual_pair").is_not_null())
            .then(pl.col("usual_pair").struct.field(name))
            .otherwise(pl.col(name))
            .alias(name)
            for name in ("lock_relation", "lock_mode")
        )
        .drop("usual_pair")
    )


def _most_seen(known: pl.DataFrame, by: list[str], what: str) -> pl.DataFrame:
    """The value of `what` seen most often for each `by` ("pair": the table and the mode),
    as a column `usual_<what>`."""
    value = pl.struct("lock_relation", "lock_mode") if what == "pair" else pl.col(what)
    return (
        known.with_columns(value.alias("value"))
        .group_by(*by, "value", maintain_order=True)
        .len()
        # A tie goes to the value seen first.
        .sort("len", descending=True, maintain_order=True)
        .unique(by, keep="first", maintain_order=True)
        .select(*by, pl.col("value").alias(f"usual_{what}"))
    )


def lock_waits(activity: pl.DataFrame, top: int = TOP) -> dict[str, Any]:
    """The locks waited for in `activity` (one component's samples), the most waited first."""
    busy = in_transaction(activity)
    waits = busy.filter(pl.col("wait_event_type") == "Lock").with_columns(
        pl.coalesce("lock_type", "wait_event").alias("lock_type")
    )
    waits = _with_modes(waits)
    total = busy.height
    groups = (
        waits.group_by(KEY, maintain_order=True)
        .agg(pl.len().alias("n"), pl.col("blocker_state").drop_nulls().mode().sort().first())
        .sort(["n", *KEY], descending=[True, *[False] * len(KEY)], nulls_last=True)
        .head(top)
    )
    return {
        "backends": total,
        "waiting_share": waits.height / total if total else 0.0,
        "locks": [_lock(row, total) for row in groups.iter_rows(named=True)],
    }


def _lock(row: dict[str, Any], total: int) -> dict[str, Any]:
    return {
        "relation": row["lock_relation"],
        "lock_type": row["lock_type"],
        "mode": row["lock_mode"],
        "waiting": row["statement"],
        "holding": row["blocker_statement"],
        "holder_state": row["blocker_state"],
        "share": row["n"] / total if total else 0.0,
        "samples": row["n"],
    }
