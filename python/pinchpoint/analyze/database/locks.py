"""The locks a database's backends waited for: per table, lock and pair of statements
(the one that waits, the one at the head of the chain that holds it), the share of the
sampled backends in a transaction that waited so.

A backend in a transaction is one sampled in any state but `idle`: running a statement,
waiting for a lock, or idle inside its transaction (a holder of a row often is: its
UPDATE done, it works before it commits). A lock seen in pg_stat_activity but gone from
pg_locks a moment later has no mode in its sample: it takes the mode most often seen for
the same type of lock on the same table.
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
    """The waits, a missing mode filled with the one most seen for its type and table."""
    seen = (
        waits.filter(pl.col("lock_mode").is_not_null())
        .group_by("lock_type", "lock_relation", "lock_mode")
        .len()
        .sort("len", descending=True)
        .unique(["lock_type", "lock_relation"], keep="first")
        .select("lock_type", "lock_relation", pl.col("lock_mode").alias("usual_mode"))
    )
    joined = waits.join(seen, on=["lock_type", "lock_relation"], how="left", nulls_equal=True)
    return joined.with_columns(pl.coalesce("lock_mode", "usual_mode").alias("lock_mode")).drop(
        "usual_mode"
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
        .agg(pl.len().alias("n"), pl.col("blocker_state").drop_nulls().mode().first())
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
