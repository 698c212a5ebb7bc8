"""OTLP trace payloads (`ExportTraceServiceRequest`, protobuf or JSON) decoded into spans.

A payload that is not an export request at all raises PayloadError (the receiver answers
400); a span in it that lacks what a tier record needs (ids of the right length, an end
after its start, a duration under a day) is rejected and counted, and the others are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

# OTLP SpanKind.
INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER = 1, 2, 3, 4, 5
MAX_SPAN_NS = 86_400 * 10**9
# The attributes a tier record is made from; others are not kept.
KEPT = frozenset(
    {
        "http.target", "http.url", "url.full", "url.query", "url.path",
        "http.status_code", "http.response.status_code",
        "db.system", "db.system.name", "peer.service", "server.address", "net.peer.name",
        "rpc.service",
    }
)  # fmt: skip
Value = str | int | float | bool


class PayloadError(ValueError):
    """The body is not an OTLP export request."""


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16
    parent_id: str | None
    service: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Value] = field(default_factory=dict)


@dataclass
class Decoded:
    spans: list[Span] = field(default_factory=list)
    rejected: int = 0  # spans without what a record needs


def decode_protobuf(body: bytes) -> Decoded:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise PayloadError(f"not an OTLP protobuf export request: {exc}") from None
    out = Decoded()
    for resource_spans in request.resource_spans:
        service = _proto_attrs(resource_spans.resource.attributes).get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                _keep(
                    out,
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.parent_span_id.hex(),
                    service,
                    span.name,
                    span.kind,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                    _proto_attrs(span.attributes),
                )
    return out


def decode_json(body: bytes) -> Decoded:
    """OTLP/JSON: lowerCamelCase keys, ids in hex, 64-bit integers as strings or numbers."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise PayloadError(f"not JSON: {exc}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("resourceSpans", []), list):
        raise PayloadError("not an OTLP JSON export request: no resourceSpans list")
    out = Decoded()
    for resource_spans in _dicts(payload.get("resourceSpans", [])):
        resource = resource_spans.get("resource")
        attrs = resource.get("attributes") if isinstance(resource, dict) else None
        service = _json_attrs(attrs).get("service.name")
        for scope_spans in _dicts(resource_spans.get("scopeSpans", [])):
            for span in _dicts(scope_spans.get("spans", [])):
                _keep(
                    out,
                    _text(span.get("traceId")),
                    _text(span.get("spanId")),
                    _text(span.get("parentSpanId")),
                    service,
                    _text(span.get("name")),
                    _int(span.get("kind")),
                    _int(span.get("startTimeUnixNano")),
                    _int(span.get("endTimeUnixNano")),
                    _json_attrs(span.get("attributes")),
                )
    return out


def _keep(
    out: Decoded,
    trace_id: str,
    span_id: str,
    parent_id: str,
    service: Value | None,
    name: str,
    kind: int | None,
    start_ns: int | None,
    end_ns: int | None,
    attributes: dict[str, Value],
) -> None:
    ok = (
        _is_id(trace_id, 32)
        and _is_id(span_id, 16)
        and (parent_id == "" or _is_id(parent_id, 16))
        and start_ns is not None
        and end_ns is not None
        and 0 < start_ns <= end_ns
        and end_ns - start_ns <= MAX_SPAN_NS
    )
    if not ok or start_ns is None or end_ns is None:
        out.rejected += 1
        return
    out.spans.append(
        Span(
            trace_id=trace_id.lower(),
            span_id=span_id.lower(),
            parent_id=parent_id.lower() or None,
            service=str(service) if service not in (None, "") else "unknown_service",
            name=name[:200],
            kind=kind if kind in (INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER) else INTERNAL,
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=attributes,
        )
    )


def _is_id(value: str, digits: int) -> bool:
    if len(value) != digits or value.strip("0") == "":
        return False
    try:
        int(value, 16)
    except ValueError:
        return False
    return True


def _proto_attrs(values: Iterable[KeyValue]) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for kv in values:
        if kv.key in KEPT or kv.key == "service.name":
            value = _proto_value(kv.value)
            if value is not None:
                out[kv.key] = value
    return out


def _proto_value(value: AnyValue) -> Value | None:
    which = value.WhichOneof("value")
    if which in ("string_value", "int_value", "double_value", "bool_value"):
        found: Value = getattr(value, which)
        return found[:2000] if isinstance(found, str) else found
    return None


def _json_attrs(values: Any) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for kv in _dicts(values if isinstance(values, list) else []):
        key = kv.get("key")
        value = kv.get("value")
        if (
            isinstance(key, str)
            and (key in KEPT or key == "service.name")
            and isinstance(value, dict)
        ):
            if isinstance(value.get("stringValue"), str):
                out[key] = value["stringValue"][:2000]
            elif (number := _int(value.get("intValue"))) is not None:
                out[key] = number
            elif isinstance(value.get("doubleValue"), int | float):
                out[key] = float(value["doubleValue"])
            elif isinstance(value.get("boolValue"), bool):
                out[key] = value["boolValue"]
    return out


def _dicts(values: Any) -> Iterator[dict[str, Any]]:
    if isinstance(values, list):
        yield from (v for v in values if isinstance(v, dict))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and len(value) <= 20:
        return int(value)
    return None
