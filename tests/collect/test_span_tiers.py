"""Spans of a run turned into tier records: request ids from trace ids, load levels from
the tag, self time as the span's duration minus the union of what it waited on."""

from __future__ import annotations

from dataclasses import asdict, replace

import polars as pl
import pytest

from pinchpoint.analyze.steps import tier_step
from pinchpoint.collect.traces.spans import CLIENT, INTERNAL, SERVER, Span
from pinchpoint.collect.traces.tiers import tiers_of
from pinchpoint.logformats.tag import trace_id

RUN = "r-spans"
MS = 1_000_000
T0 = 1_800_000_000 * 10**9


def span(
    sid: int,
    parent: int | None,
    service: str,
    kind: int,
    start_ms: float,
    end_ms: float,
    req: int = 7,
    run: str = RUN,
    **attributes: str | int,
) -> Span:
    return Span(
        trace_id=trace_id(run, req),
        span_id=f"{sid:016x}",
        parent_id=None if parent is None else f"{parent:016x}",
        service=service,
        name=f"span {sid}",
        kind=kind,
        start_ns=T0 + int(start_ms * MS),
        end_ns=T0 + int(end_ms * MS),
        attributes={k.replace("_", ".", 1): v for k, v in attributes.items()},
    )


def entry(req: int = 7, users: int = 3, run: str = RUN) -> Span:
    target = f"/api?pp_run={run}&pp_users={users}&pp_req={req}"
    return span(
        1, None, "app", SERVER, 0, 100, req=req, run=run, http_target=target, http_status_code=200
    )


def rows_by_component(spans: list[Span]) -> dict:
    return {row.component: row for row in tiers_of(spans, RUN).rows}


def test_calls_in_sequence_are_subtracted_from_the_caller() -> None:
    spans = [
        entry(),
        span(2, 1, "app", CLIENT, 10, 30, db_system="sqlite"),
        span(3, 1, "app", CLIENT, 40, 90, server_address="svc2"),
        span(4, 3, "svc2", SERVER, 45, 85),
    ]
    found = tiers_of(spans, RUN)
    rows = {row.component: row for row in found.rows}
    assert set(rows) == {"app", "app/sqlite", "app/svc2", "svc2"}
    app = rows["app"]
    assert (app.users, app.req_id, app.status) == (3, 7, 200)
    assert app.duration_s == pytest.approx(0.100)
    assert app.upstream_s == pytest.approx(0.070)  # 20 ms of sqlite + 50 ms of svc2
    # All of the call waits on svc2: the 10 ms beyond svc2's span are its queue and the wire.
    assert rows["app/svc2"].upstream_s == pytest.approx(0.050)
    assert rows["app/sqlite"].upstream_s is None
    kinds = {name: (row.span_kind, row.parent) for name, row in rows.items()}
    assert kinds == {
        "app": ("server", None),
        "app/sqlite": ("client", "app"),
        "app/svc2": ("client", "app"),
        "svc2": ("server", "app/svc2"),
    }
    assert dict(found.calls) == {"app": {"app/sqlite", "app/svc2"}, "app/svc2": {"svc2"}}


def test_calls_in_parallel_are_not_subtracted_twice() -> None:
    spans = [
        entry(),
        span(2, 1, "app", CLIENT, 10, 60, db_system="postgresql"),
        span(3, 1, "app", CLIENT, 20, 80, peer_service="cache"),
    ]
    rows = rows_by_component(spans)
    assert rows["app"].upstream_s == pytest.approx(0.070)  # 10..80, not 50 + 60
    self_ms = (rows["app"].duration_s - rows["app"].upstream_s) * 1000
    assert self_ms == pytest.approx(30.0)


def test_internal_spans_are_the_services_own_time_and_their_calls_still_count() -> None:
    spans = [
        entry(),
        span(2, 1, "app", INTERNAL, 5, 95),
        span(3, 2, "app", CLIENT, 10, 30, db_system="sqlite"),
    ]
    found = tiers_of(spans, RUN)
    assert [row.component for row in found.rows] == ["app", "app/sqlite"]
    assert found.rows[0].upstream_s == pytest.approx(0.020)
    assert found.counts["app"].matched == 2  # the server span and the folded internal one
    assert found.rows[1].parent == "app", "through the internal span"


def test_spans_of_other_traces_and_untagged_traces_are_counted_not_kept() -> None:
    spans = [
        entry(),
        *[span(i, None, "app", SERVER, 0, 5, req=9, run="another-run") for i in (5, 6)],
        span(8, None, "app", SERVER, 0, 5, req=11),  # a trace of the run with no tag
    ]
    found = tiers_of(spans, RUN)
    assert [row.req_id for row in found.rows] == [7]
    counts = found.counts["app"]
    assert (counts.spans, counts.matched, counts.other_run, counts.untagged) == (4, 1, 2, 1)


def test_a_trace_without_a_url_takes_its_load_level_from_the_baggage_on_its_spans() -> None:
    """A gRPC call's path carries no query: the load level comes from `pp.users` (or
    `pp.rate`), copied from the request's baggage by the app's baggage span processor."""

    def call(sid: int, req: int, **baggage: str) -> Span:
        attributes = {"rpc.system": "grpc", "rpc.method": "Echo", **baggage}
        return replace(span(sid, None, "shop", SERVER, 0, 20, req=req), attributes=attributes)

    spans = [
        call(1, 7, **{"pp.run": RUN, "pp.users": "4"}),
        call(2, 8, **{"pp.run": RUN, "pp.rate": "40"}),
        call(3, 9, **{"pp.run": "another-run", "pp.users": "4"}),  # not this run's baggage
        call(4, 10),  # nothing says its load level
    ]
    found = tiers_of(spans, RUN)
    assert [(row.req_id, row.users) for row in found.rows] == [(7, 4), (8, 0)]
    counts = found.counts["shop"]
    assert (counts.spans, counts.matched, counts.other_run, counts.untagged) == (4, 2, 0, 2)


def get(sid: int, start_ms: float, end_ms: float, port: int, req: int = 7) -> Span:
    """A call as HTTP client instrumentations record it: named `GET`, no peer.service."""
    url = f"http://127.0.0.1:{port}/work"
    return replace(span(sid, 1, "app", CLIENT, start_ms, end_ms, req=req, url_full=url), name="GET")


def parallel_calls(req: int = 7) -> list[Span]:
    """The app calls svc-a and svc-b side by side; svc-b's request waits 30 ms for it."""
    return [
        entry(req=req),
        get(2, 10, 60, port=5001, req=req),
        span(3, 2, "svc-a", SERVER, 12, 58, req=req),
        get(4, 10, 90, port=5002, req=req),
        span(5, 4, "svc-b", SERVER, 40, 88, req=req),
    ]


def test_parallel_calls_named_get_are_the_tiers_of_the_services_that_answer_them() -> None:
    found = tiers_of(parallel_calls(), RUN)
    rows = {row.component: row for row in found.rows}
    assert set(rows) == {"app", "app/svc-a", "app/svc-b", "svc-a", "svc-b"}
    assert dict(found.calls) == {
        "app": {"app/svc-a", "app/svc-b"},
        "app/svc-a": {"svc-a"},
        "app/svc-b": {"svc-b"},
    }
    assert rows["app"].upstream_s == pytest.approx(0.080)  # 10..90, the union of the two
    # Each call waits on its own callee: its span's time beyond the callee's is its queue.
    assert rows["app/svc-a"].upstream_s == pytest.approx(0.050)
    assert rows["app/svc-b"].upstream_s == pytest.approx(0.080)
    assert (rows["svc-a"].parent, rows["svc-b"].parent) == ("app/svc-a", "app/svc-b")


def test_the_queue_before_each_callee_of_a_fan_out_is_its_own_calls_wait() -> None:
    spans = [s for req in (7, 8, 9) for s in parallel_calls(req)]
    found = tiers_of(spans, RUN)
    tiers = pl.DataFrame([asdict(row) for row in found.rows])
    calls = {caller: sorted(callees) for caller, callees in found.calls.items()}
    order = ["app", "app/svc-a", "app/svc-b", "svc-a", "svc-b"]
    step = tier_step(tiers, pl.Series([7, 8, 9]), 3, order, calls, throughput=10.0)
    assert step["svc-a"]["queue_p50_ms"] == pytest.approx(4.0)  # 50 ms call, 46 ms span
    assert step["svc-b"]["queue_p50_ms"] == pytest.approx(32.0)  # 80 ms call, 48 ms span


def test_a_call_whose_answer_is_missing_counts_in_the_tier_of_who_answers_its_address() -> None:
    answered = parallel_calls(req=7)
    lost = [entry(req=8), get(2, 10, 90, port=5002, req=8)]  # svc-b's span never came
    rows = [row for row in tiers_of(answered + lost, RUN).rows if row.req_id == 8]
    assert [row.component for row in rows] == ["app", "app/svc-b"]
    assert rows[1].upstream_s is None


def test_peer_service_names_a_call_no_instrumented_service_answers() -> None:
    spans = [
        entry(),
        replace(span(2, 1, "app", CLIENT, 10, 30, peer_service="orders-db"), name="SELECT"),
        replace(span(3, 1, "app", CLIENT, 30, 40, server_address="cache"), name="GET"),
    ]
    found = tiers_of(spans, RUN)
    assert [row.component for row in found.rows] == ["app", "app/orders-db", "app/cache"]
    assert dict(found.calls) == {"app": {"app/orders-db", "app/cache"}}


def test_the_answering_service_comes_before_the_peer_service_the_caller_set() -> None:
    spans = [
        entry(),
        span(2, 1, "app", CLIENT, 10, 60, peer_service="payments"),
        span(3, 2, "payments-v2", SERVER, 12, 58),
    ]
    assert set(rows_by_component(spans)) == {"app", "app/payments-v2", "payments-v2"}
