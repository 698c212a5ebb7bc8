"""OTLP/protobuf export requests read straight from the wire, span by span.

Only what a tier record needs is read: each resource's `service.name`, and each span's
ids, name, kind, times and kept attributes (`spans.KEPT`); the rest (events, links,
scopes, unknown fields) is skipped by its length without being decoded. Nothing is built
for what is skipped, so the memory a payload takes is its bytes and the spans kept: a
generic decoder builds an object for every message, and an export request of 32 MiB of
empty messages took it over 1 GB. Each span of up to SMALL_SPAN bytes is handed to that
decoder alone (its objects then take a few MB at most), as it reads a span 3 times faster.

The work a payload may take is bounded too: MAX_WORK fields walked and attributes looked
at (a span of a dozen attributes is about 14), about 2 s of this program's time; past it
the payload is refused. A varint longer than 10 bytes, a field past its message's end and
a wire type protobuf no longer uses (groups) are refused as not an export request.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from google.protobuf.message import DecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from pinchpoint.collect.traces.spans import (
    KEPT,
    MAX_NAME_CHARS,
    Decoded,
    PayloadError,
    SpanFields,
    Value,
    keep,
)

LEN, VARINT, I64, I32 = 2, 0, 1, 5
Body = bytes | bytearray
# A span up to this size is decoded by protobuf's own decoder (faster; at most a few MB for
# a moment however it is built); a larger one is walked.
SMALL_SPAN = 16 << 10
MAX_WORK = 2_000_000
_KEPT_KEYS = {key.encode(): key for key in (*KEPT, "service.name")}
_DOUBLE = struct.Struct("<d")
_U64 = struct.Struct("<Q")
_NOT_OTLP = "not an OTLP protobuf export request"


def decode_protobuf(body: Body) -> Decoded:
    """The spans of an `ExportTraceServiceRequest` in `body`."""
    return _Walk(body).request()


class _Walk:
    def __init__(self, body: Body) -> None:
        self.body = body
        self.work = MAX_WORK
        self.out = Decoded()

    def request(self) -> Decoded:
        for field, wire, start, end in self.fields(0, len(self.body)):
            if field == 1 and wire == LEN:
                self.resource_spans(start, end)
        return self.out

    def resource_spans(self, start: int, end: int) -> None:
        service: Value | None = None
        for field, wire, at, stop in self.fields(start, end):
            if field == 1 and wire == LEN:  # resource: its attributes
                for f, w, a, s in self.fields(at, stop):
                    if f == 1 and w == LEN:
                        key, value = self.key_value(a, s)
                        if key == "service.name" and value is not None:
                            service = value
        for field, wire, at, stop in self.fields(start, end):
            if field == 2 and wire == LEN:  # scope_spans
                for f, w, a, s in self.fields(at, stop):
                    if f == 2 and w == LEN:
                        self.span(a, s, service)

    def span(self, start: int, end: int, service: Value | None) -> None:
        if end - start <= SMALL_SPAN:
            try:
                message = Span.FromString(bytes(self.body[start:end]))
            except (DecodeError, RecursionError, ValueError):
                pass  # walked below, which skips what it does not need
            else:
                self.small_span(message, service)
                return
        span = SpanFields(service=service)
        for field, wire, at, stop in self.fields(start, end):
            if wire == LEN:
                if field == 9:
                    key, value = self.key_value(at, stop)
                    if key is not None and key != "service.name" and value is not None:
                        span.attributes[key] = value
                elif field == 1:
                    span.trace_id = self.body[at:stop].hex()
                elif field == 2:
                    span.span_id = self.body[at:stop].hex()
                elif field == 4:
                    span.parent_id = self.body[at:stop].hex()
                elif field == 5:
                    span.name = self.text(at, min(stop, at + 4 * MAX_NAME_CHARS))
            elif wire == VARINT and field == 6:
                span.kind = at
            elif wire == I64 and field in (7, 8):
                time_ns = _U64.unpack_from(self.body, at)[0]
                if field == 7:
                    span.start_ns = time_ns
                else:
                    span.end_ns = time_ns
        keep(self.out, span)

    def small_span(self, message: Span, service: Value | None) -> None:
        self.spend(3 + len(message.attributes))
        attributes: dict[str, Value] = {}
        for kv in message.attributes:
            key = kv.key
            if key in KEPT:
                which = kv.value.WhichOneof("value")
                if which in ("string_value", "int_value", "double_value", "bool_value"):
                    attributes[key] = getattr(kv.value, which)
        read = SpanFields(
            service=service,
            trace_id=message.trace_id.hex(),
            span_id=message.span_id.hex(),
            parent_id=message.parent_span_id.hex(),
            name=message.name[:MAX_NAME_CHARS],
            kind=message.kind,
            start_ns=message.start_time_unix_nano,
            end_ns=message.end_time_unix_nano,
            attributes=attributes,
        )
        keep(self.out, read)

    def key_value(self, start: int, end: int) -> tuple[str | None, Value | None]:
        """A KeyValue's key if it is one a record needs, and its scalar value."""
        key: str | None = None
        value_at: tuple[int, int] | None = None
        for field, wire, at, stop in self.fields(start, end):
            if wire != LEN:
                continue
            if field == 1:
                key = _KEPT_KEYS.get(bytes(self.body[at:stop]))
            elif field == 2:
                value_at = (at, stop)
        if key is None or value_at is None:
            return key, None
        return key, self.any_value(*value_at)

    def any_value(self, start: int, end: int) -> Value | None:
        """An AnyValue's string, bool, int or double (the last one set), else None."""
        value: Value | None = None
        for field, wire, at, stop in self.fields(start, end):
            if field == 1 and wire == LEN:
                value = self.text(at, stop)
            elif field == 2 and wire == VARINT:
                value = at != 0
            elif field == 3 and wire == VARINT:
                value = at - (1 << 64) if at >= 1 << 63 else at
            elif field == 4 and wire == I64:
                value = _DOUBLE.unpack_from(self.body, at)[0]
            elif field in (5, 6, 7):
                value = None
        return value

    def text(self, start: int, end: int) -> str:
        return self.body[start:end].decode("utf-8", "replace")

    def spend(self, work: int) -> None:
        self.work -= work
        if self.work < 0:
            raise PayloadError(f"a protobuf payload of more than {MAX_WORK:,} fields to read")

    def fields(self, pos: int, end: int) -> Iterator[tuple[int, int, int, int]]:
        """Each field of the message in body[pos:end]: (number, wire type, start, end) of
        a length-delimited or fixed-size one, (number, wire type, value, end) of a varint."""
        body = self.body
        while pos < end:
            self.spend(1)
            key, pos = _varint(body, pos, end)
            field, wire = key >> 3, key & 7
            if field == 0:
                raise PayloadError(f"{_NOT_OTLP}: a field numbered 0")
            if wire == VARINT:
                value, pos = _varint(body, pos, end)
                yield field, wire, value, pos
                continue
            if wire == LEN:
                size, pos = _varint(body, pos, end)
            elif wire in (I64, I32):
                size = 8 if wire == I64 else 4
            else:
                raise PayloadError(f"{_NOT_OTLP}: wire type {wire}")
            if size > end - pos:
                raise PayloadError(f"{_NOT_OTLP}: a field past its message's end")
            yield field, wire, pos, pos + size
            pos += size


def _varint(body: Body, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while pos < end:
        byte = body[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, pos
        shift += 7
        if shift >= 70:
            break
    raise PayloadError(f"{_NOT_OTLP}: a varint cut short or over 10 bytes")
