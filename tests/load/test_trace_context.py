"""Every tagged request carries W3C trace context whose trace id names its run and
request, sent by the real engine to a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from load_helpers import http_server, make_plan

from pinchpoint.load.engine import run_steps
from pinchpoint.logformats.tag import parse_header, request_of_trace, span_id, trace_id

pytestmark = pytest.mark.timeout(60)
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01")


def test_each_request_carries_a_traceparent_of_its_run_and_request(tmp_path: Path) -> None:
    run_id = "pytest-trace.1"
    with http_server() as (port, seen):
        run_steps(make_plan(port, lower=1, upper=2, duration="0.5s"), run_id, tmp_path)
    assert len(seen.traces) == len(seen.tags) > 10
    ids = set()
    for (parent, baggage), header in zip(seen.traces, seen.tags, strict=True):
        tag = parse_header(header or "")
        assert tag is not None and tag.req_id is not None
        match = TRACEPARENT.fullmatch(parent or "")
        assert match, parent
        assert match.group(1) == trace_id(run_id, tag.req_id)
        assert match.group(2) == span_id(tag.req_id)
        assert request_of_trace(run_id, match.group(1)) == tag.req_id
        assert request_of_trace("another-run", match.group(1)) is None
        assert baggage == f"pp.run={run_id},pp.users={tag.users}"
        ids.add(match.group(1))
    assert len(ids) == len(seen.traces), "one trace per request"


def test_a_trace_id_is_never_all_zeros_and_its_request_id_comes_back() -> None:
    assert trace_id("r", 0) != "0" * 32
    assert request_of_trace("r", trace_id("r", 2**64 - 1).upper()) == 2**64 - 1
    assert request_of_trace("r", trace_id("r", 5)[:-1]) is None
    assert request_of_trace("r", trace_id("r", 5)[:16] + "zz" + "0" * 14) is None
