"""A tier that logs nothing is timed by its only caller's upstream time; a caller that
names nothing below it gets an unnamed tier there."""

from __future__ import annotations

import polars as pl

from pinchpoint.analyze.unlogged import by_callers


def _records(component: str, upstream: list[float | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "component": [component] * len(upstream),
            "req_id": list(range(len(upstream))),
            "duration_s": [0.02] * len(upstream),
            "upstream_s": upstream,
        },
        schema_overrides={"upstream_s": pl.Float64},
    )


def test_a_server_known_by_its_processes_takes_its_callers_upstream_time() -> None:
    timed = by_callers(_records("nginx", [0.015, 0.018, None]), {"nginx": ["node"], "node": []})
    node = timed.tiers.filter(pl.col("component") == "node")
    assert node["duration_s"].to_list() == [0.015, 0.018]
    assert node["upstream_s"].null_count() == 2
    assert timed.timed_by == {"node": "nginx"}
    assert timed.calls == {"nginx": ["node"], "node": []}


def test_a_caller_naming_nothing_below_gets_an_unnamed_tier() -> None:
    timed = by_callers(_records("nginx", [0.015]), {"nginx": []})
    assert timed.calls == {"nginx": ["nginx-upstream"], "nginx-upstream": []}
    assert timed.timed_by == {"nginx-upstream": "nginx"}


def test_a_callee_that_logs_or_shares_its_caller_is_left_alone() -> None:
    logged = pl.concat([_records("nginx", [0.015]), _records("app", [None])])
    assert by_callers(logged, {"nginx": ["app"], "app": []}).timed_by == {}
    fan_out = {"nginx": ["a", "b"], "a": [], "b": []}
    assert by_callers(_records("nginx", [0.015]), fan_out).timed_by == {}
    static = by_callers(_records("nginx", [None, None]), {"nginx": []})
    assert static.timed_by == {} and static.calls == {"nginx": []}
