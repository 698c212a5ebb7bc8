"""OTLP/JSON export requests (lowerCamelCase keys, ids in hex, 64-bit integers as strings
or numbers) read into spans, within limits set before anything is built.

A JSON decoder builds an object for every value: 32 MiB of `{},` decodes into about 800 MB.
So a body is first counted (its `,` `:` `[` and `{`, a bound on its values) and refused
past MAX_VALUES, which keeps one payload's objects under about 70 MB; and its text, which
the decoder holds whole and again in its strings, at 4 bytes a character when one
character is past U+FFFF (an emoji), is refused past MAX_TEXT bytes (a body of ASCII up to
32 MiB, of other characters 16 or 8 MiB). An integer of more than MAX_INT_DIGITS digits
and nesting deeper than the interpreter's recursion limit are refused too. Each refusal is
a PayloadError (the receiver answers 400).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from pinchpoint.collect.traces.spans import KEPT, Decoded, PayloadError, SpanFields, Value, keep

MAX_VALUES = 1_000_000
MAX_TEXT = 32 << 20  # bytes of the body as text: 1, 2 or 4 a character, as Python holds it
_ASTRAL = re.compile(rb"[\xf0-\xff]")  # a UTF-8 lead byte of a character past U+FFFF
MAX_INT_DIGITS = 32  # OTLP's integers are 64-bit: 20 digits


def decode_json(body: bytes | bytearray) -> Decoded:
    """The spans of an OTLP/JSON export request in `body`."""
    text = len(body) * _width(body)
    if text > MAX_TEXT:
        raise PayloadError(
            f"a JSON body of {len(body):,} bytes is {text:,} bytes as text: over {MAX_TEXT:,}"
        )
    values = body.count(b",") + body.count(b":") + body.count(b"[") + body.count(b"{")
    if values > MAX_VALUES:
        raise PayloadError(f"a JSON body of {values:,} values or more is over {MAX_VALUES:,}")
    try:
        payload = json.loads(body, parse_int=_int_of)
    except PayloadError:
        raise
    except RecursionError:
        raise PayloadError("not JSON this program reads: nested too deep") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise PayloadError(f"not JSON: {exc}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("resourceSpans", []), list):
        raise PayloadError("not an OTLP JSON export request: no resourceSpans list")
    out = Decoded()
    for resource_spans in _dicts(payload.get("resourceSpans", [])):
        resource = resource_spans.get("resource")
        attrs = resource.get("attributes") if isinstance(resource, dict) else None
        service = _attributes(attrs).get("service.name")
        for scope_spans in _dicts(resource_spans.get("scopeSpans", [])):
            for span in _dicts(scope_spans.get("spans", [])):
                read = SpanFields(
                    service=service,
                    trace_id=_text(span.get("traceId")),
                    span_id=_text(span.get("spanId")),
                    parent_id=_text(span.get("parentSpanId")),
                    name=_text(span.get("name")),
                    kind=_int(span.get("kind")),
                    start_ns=_int(span.get("startTimeUnixNano")),
                    end_ns=_int(span.get("endTimeUnixNano")),
                    attributes=_attributes(span.get("attributes")),
                )
                read.attributes.pop("service.name", None)
                keep(out, read)
    return out


def _width(body: bytes | bytearray) -> int:
    """Bytes a character of `body` takes once decoded: Python holds a text in 1, 2 or 4
    bytes a character, the widest of its characters decides."""
    if body.isascii():
        return 1
    return 4 if _ASTRAL.search(body) else 2


def _int_of(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise PayloadError(
            f"an integer of {len(digits.lstrip('-')):,} digits: at most {MAX_INT_DIGITS}"
        )
    return int(digits)


def _attributes(values: Any) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for kv in _dicts(values):
        key = kv.get("key")
        value = kv.get("value")
        if not (isinstance(key, str) and (key in KEPT or key == "service.name")):
            continue
        if not isinstance(value, dict):
            continue
        if isinstance(value.get("stringValue"), str):
            out[key] = value["stringValue"]
        elif (number := _int(value.get("intValue"))) is not None:
            out[key] = number
        elif isinstance(value.get("doubleValue"), int | float) and not isinstance(
            value.get("doubleValue"), bool
        ):
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
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        return int(value)
    return None
