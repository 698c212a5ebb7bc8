"""Property-based fuzzing of the OTLP receiver: export bodies, JSON and protobuf, built with
hostile values and then edited (otlp_bodies.py), handed to the decoders and posted to a
receiver in its own process. A decoder gives spans that a tier record can be made of, or a
PayloadError, nothing else; the receiver answers each body 200 or 400, counts it, and
writes nothing to its terminal; the protobuf walk reads what protobuf's own decoder reads.

The budget is Hypothesis's profile (tests/conftest.py): in `make test`, 40 examples a
test, 200 bodies in all (5 tests, about 5 s); with HYPOTHESIS_PROFILE=long, 5,000 a test.
bench/fuzz_otlp.py posts 30,000 and more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collect.otlp_bodies import json_bodies, protobuf_bodies, protobuf_requests
from collect.otlp_process import ReceiverProcess
from pinchpoint.collect.traces import otlp_proto
from pinchpoint.collect.traces.otlp_json import decode_json
from pinchpoint.collect.traces.otlp_proto import decode_protobuf
from pinchpoint.collect.traces.spans import KEPT, MAX_SPAN_NS, Decoded, PayloadError

pytestmark = pytest.mark.timeout(300)
HEX = re.compile(r"[0-9a-f]+")
JSON = {"Content-Type": "application/json"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def check_spans(decoded: Decoded) -> None:
    """Every span kept is one a tier record can be made of, and can be written."""
    assert decoded.rejected >= 0
    for span in decoded.spans:
        assert len(span.trace_id) == 32 and HEX.fullmatch(span.trace_id)
        assert len(span.span_id) == 16 and HEX.fullmatch(span.span_id)
        assert span.parent_id is None or (
            len(span.parent_id) == 16 and HEX.fullmatch(span.parent_id)
        )
        assert 0 < span.start_ns <= span.end_ns <= span.start_ns + MAX_SPAN_NS
        assert 1 <= span.kind <= 5
        assert len(span.name) <= 200 and len(span.service) <= 128
        span.name.encode()
        span.service.encode()
        for key, value in span.attributes.items():
            assert key in KEPT
            if isinstance(value, str):
                assert len(value) <= 1000
                value.encode()


@given(json_bodies())
def test_a_json_body_decodes_to_spans_or_is_refused(body: bytes) -> None:
    try:
        decoded = decode_json(body)
    except PayloadError:
        return
    check_spans(decoded)


@given(protobuf_bodies(), st.sampled_from([0, otlp_proto.SMALL_SPAN]))
def test_a_protobuf_body_decodes_to_spans_or_is_refused(body: bytes, small_span: int) -> None:
    walked_from = otlp_proto.SMALL_SPAN
    otlp_proto.SMALL_SPAN = small_span  # 0: every span walked, none given to protobuf
    try:
        decoded = decode_protobuf(body)
    except PayloadError:
        return
    finally:
        otlp_proto.SMALL_SPAN = walked_from
    check_spans(decoded)


@given(protobuf_requests())
def test_the_walk_reads_what_protobufs_own_decoder_reads(request: object) -> None:
    body = request.SerializeToString()  # type: ignore[attr-defined]
    by_decoder = decode_protobuf(body)
    walked_from = otlp_proto.SMALL_SPAN
    otlp_proto.SMALL_SPAN = -1
    try:
        walked = decode_protobuf(body)
    finally:
        otlp_proto.SMALL_SPAN = walked_from
    assert repr(walked.spans) == repr(by_decoder.spans)
    assert walked.rejected == by_decoder.rejected


class Posted:
    def __init__(self) -> None:
        self.receiver = ReceiverProcess()
        self.client = httpx.Client(timeout=30)
        self.bodies = 0
        self.refused = 0


@pytest.fixture(scope="module")
def posted() -> Iterator[Posted]:
    found = Posted()
    try:
        yield found
        found.client.close()
        seen, stderr = found.receiver.stop()
    finally:
        found.receiver.kill()
    assert stderr == ""
    assert seen["payloads"] + seen["rejected_payloads"] == found.bodies
    assert seen["rejected_payloads"] == found.refused
    assert seen["disconnects"] == 0


def _post(posted: Posted, body: bytes, headers: dict[str, str]) -> None:
    answer = posted.client.post(posted.receiver.url, content=body, headers=headers)
    posted.bodies += 1
    assert answer.status_code in (200, 400), (answer.status_code, answer.text)
    posted.refused += answer.status_code == 400


@given(json_bodies())
def test_a_json_body_posted_is_answered_and_counted(posted: Posted, body: bytes) -> None:
    _post(posted, body, JSON)


@given(protobuf_bodies())
def test_a_protobuf_body_posted_is_answered_and_counted(posted: Posted, body: bytes) -> None:
    _post(posted, body, PROTOBUF)
