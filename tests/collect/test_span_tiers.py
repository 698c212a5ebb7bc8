"""Spans of a run turned into tier records: request ids from trace ids, load levels from
the tag, self time as the span's duration minus the union of what it waited on."""

from __future__ import annotations

import pytest

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
