"""Hypothesis strategies for OTLP trace export bodies, JSON and protobuf: well-formed ones
with hostile values (ids of any length, times out of range, names and attribute values
long, empty or not text, numbers of thousands of digits, nested arrays), and those bodies
with bytes cut out, put in or overwritten. The fuzz tests (test_otlp_fuzz.py) and the
bench (bench/fuzz_otlp.py) post them to the receiver and hand them to the decoders."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from pinchpoint.collect.traces.spans import KEPT
from pinchpoint.logformats.tag import span_id, trace_id

RUN = "r-fuzz.1"
KEYS = st.sampled_from(sorted(KEPT | {"service.name", "http.method", ""})) | st.text(max_size=20)
TEXTS = (
    st.text(max_size=40)
    | st.sampled_from(["", "\ud800", "😀" * 50, "\x00\r\n", f"/x?pp_run={RUN}&pp_users=3&pp_req=7"])
    | st.integers(0, 3000).map(lambda n: "u" * n)
)
BIG = st.sampled_from([0, -1, 2**63, 2**64 - 1, 1_800_000_000_000_000_000, 10**19])
JSON_HOSTILE = [
    b"9" * 5000,
    b"-" + b"1" * 40,
    b"[" * 3000,
    b"{" * 3000,
    b'"\\ud800"',
    b"1e999999",
    b"NaN",
    b"-Infinity",
    b'"' + b"\xff\xfe" * 10 + b'"',
    b"\x00",
]


def _ids() -> st.SearchStrategy[bytes]:
    return st.binary(max_size=20) | st.integers(1, 50).map(
        lambda req: bytes.fromhex(trace_id(RUN, req))
    )


@st.composite
def json_payloads(draw: st.DrawFn) -> dict[str, Any]:
    """An OTLP/JSON export request as a dict, its values drawn from hostile ones."""

    def value() -> Any:
        return draw(
            st.one_of(
                TEXTS.map(lambda t: {"stringValue": t}),
                BIG.map(lambda n: {"intValue": str(n)}),
                st.integers(-(2**70), 2**70).map(lambda n: {"intValue": n}),
                st.floats().map(lambda f: {"doubleValue": f}),
                st.booleans().map(lambda b: {"boolValue": b}),
                st.just({"arrayValue": {"values": [{"stringValue": "a"}] * 3}}),
                st.none(),
                TEXTS,
            )
        )

    def attributes() -> list[Any]:
        count = draw(st.integers(0, 6))
        return [{"key": draw(KEYS), "value": value()} for _ in range(count)]

    def span(req: int) -> dict[str, Any]:
        start = draw(BIG | st.integers(-10, 10))
        return {
            "traceId": draw(st.just(trace_id(RUN, req)) | TEXTS),
            "spanId": draw(st.just(span_id(req)) | TEXTS),
            "parentSpanId": draw(st.just("") | st.just(span_id(req + 1)) | TEXTS),
            "name": draw(TEXTS),
            "kind": draw(st.integers(-3, 9) | TEXTS),
            "startTimeUnixNano": draw(st.just(str(start)) | st.just(start) | TEXTS),
            "endTimeUnixNano": draw(st.just(str(start + 5000)) | BIG | TEXTS),
            "attributes": attributes() if draw(st.booleans()) else draw(TEXTS),
        }

    spans = [span(req) for req in range(1, draw(st.integers(0, 5)) + 1)]
    resource = {"attributes": attributes()}
    scope = {"scope": {"name": draw(TEXTS)}, "spans": spans}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}


def _dumped(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    """An OTLP/JSON body, well-formed or edited."""
    body = _dumped(draw(json_payloads()))
    return draw(_edited(body, JSON_HOSTILE))


def _any_value(draw: st.DrawFn, depth: int = 0) -> AnyValue:
    which = draw(st.sampled_from(["s", "i", "d", "b", "a", "k", "y", "none"]))
    found = AnyValue()
    if which == "s":
        found.string_value = draw(TEXTS.filter(lambda t: "\ud800" not in t))
    elif which == "i":
        found.int_value = draw(st.integers(-(2**63), 2**63 - 1))
    elif which == "d":
        found.double_value = draw(st.floats())
    elif which == "b":
        found.bool_value = draw(st.booleans())
    elif which == "a" and depth < 3:
        found.array_value.values.extend(_any_value(draw, depth + 1) for _ in range(2))
    elif which == "k" and depth < 3:
        found.kvlist_value.values.add(key="k", value=_any_value(draw, depth + 1))
    elif which == "y":
        found.bytes_value = draw(st.binary(max_size=20))
    return found


@st.composite
def protobuf_requests(draw: st.DrawFn) -> ExportTraceServiceRequest:
    """An export request, its values drawn from hostile ones."""
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add()
        for _ in range(draw(st.integers(0, 3))):
            key = draw(KEYS.filter(lambda t: "\ud800" not in t))
            resource_spans.resource.attributes.append(KeyValue(key=key, value=_any_value(draw)))
        scope_spans = resource_spans.scope_spans.add()
        for req in range(1, draw(st.integers(0, 4)) + 1):
            span = scope_spans.spans.add()
            span.trace_id = draw(st.just(bytes.fromhex(trace_id(RUN, req))) | _ids())
            span.span_id = draw(st.just(bytes.fromhex(span_id(req))) | st.binary(max_size=10))
            span.parent_span_id = draw(st.just(b"") | st.binary(max_size=10))
            span.name = draw(TEXTS.filter(lambda t: "\ud800" not in t))
            span.kind = draw(st.integers(0, 5))
            start = draw(st.integers(0, 2**64 - 1) | st.just(1_800_000_000_000_000_000))
            span.start_time_unix_nano = start
            span.end_time_unix_nano = draw(
                st.just(min(start + 5000, 2**64 - 1)) | BIG.filter(lambda n: n >= 0)
            )
            for _ in range(draw(st.integers(0, 5))):
                key = draw(KEYS.filter(lambda t: "\ud800" not in t))
                span.attributes.append(KeyValue(key=key, value=_any_value(draw)))
            if draw(st.booleans()):
                span.events.add(name="exception", time_unix_nano=start)
    return request


@st.composite
def protobuf_bodies(draw: st.DrawFn) -> bytes:
    """A protobuf export request body, well-formed or edited."""
    body = draw(protobuf_requests()).SerializeToString()
    hostile = [b"\xff" * 11, b"\x0a\xff\xff\xff\xff\x0f", b"\x0b", b"\x0a\x00" * 500, b"\x00"]
    return draw(_edited(body, hostile))


def _edited(body: bytes, hostile: list[bytes]) -> st.SearchStrategy[bytes]:
    """`body` as it is, or with bytes cut out, put in or overwritten."""

    @st.composite
    def edit(draw: st.DrawFn) -> bytes:
        out = bytearray(body)
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(out)))
            how = draw(st.sampled_from(["cut", "insert", "overwrite", "truncate"]))
            piece = draw(st.sampled_from(hostile) | st.binary(min_size=1, max_size=8))
            if how == "cut":
                del out[at : at + draw(st.integers(1, 16))]
            elif how == "insert":
                out[at:at] = piece
            elif how == "overwrite":
                out[at : at + len(piece)] = piece
            else:
                del out[at:]
        return bytes(out)

    return st.just(body) | edit()
