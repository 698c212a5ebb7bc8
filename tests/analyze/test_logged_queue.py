"""A tier's own logged queue time (HAProxy Tw) in the step table."""

from __future__ import annotations

import polars as pl
import pytest

from pinchpoint.analyze.steps import tier_step


def test_the_queue_a_tier_logs_itself_is_summarised_per_step() -> None:
    tiers = pl.DataFrame(
        {
            "component": ["lb"] * 4 + ["app"] * 4,
            "users": [4] * 8,
            "req_id": [1, 2, 3, 4] * 2,
            "ts": [1.0] * 8,
            "duration_s": [0.11, 0.31, 0.51, 0.12, 0.1, 0.1, 0.1, 0.1],
            "upstream_s": [0.1, 0.1, 0.1, 0.1, None, None, None, None],
            "status": [200] * 8,
            "queue_s": [0.0, 0.2, 0.4, None, None, None, None, None],
        },
        schema_overrides={"users": pl.UInt32, "req_id": pl.UInt64, "status": pl.Int32},
    )
    out = tier_step(tiers, pl.Series([1, 2, 3, 4]), 4, ["lb", "app"], {"lb": ["app"]}, 10.0)
    assert out["lb"]["logged_queue_p50_ms"] == pytest.approx(200.0)
    assert out["lb"]["logged_queue_p95_ms"] == pytest.approx(380.0)
    # A tier whose format logs no queue gets no such key.
    assert "logged_queue_p50_ms" not in out["app"]
