"""JSON lines: one JSON object a line, read through a field mapping given as the log_format.

The mapping is a comma-separated list of `field=path`, e.g.

    uri=request.path,duration_ms=latency,status=code

where `path` names a value in the object: a key, or keys joined by dots to reach into
nested objects (`request.path` is `{"request": {"path": ...}}`; a key that itself holds
dots, such as `{"http.status": 200}`, is found as well; a number picks a list item).
The fields pinchpoint knows:

| field | meaning |
|---|---|
| `uri` | text holding the tag: URI, request line or query string (an object of query fields is joined as `k=v&...`) |
| `header` | the logged `X-Pinchpoint` header value |
| `duration_s`, `duration_ms`, `duration_us` | the tier's time for the request (one of them is required) |
| `upstream_s`, `upstream_ms`, `upstream_us` | the time it waited on the component it calls |
| `status` | HTTP status |
| `ts`, `ts_ms`, `ts_us` | when the request ended: unix time in that unit, or an ISO 8601 string (UTC if no offset) |
| `start`, `start_ms`, `start_us` | when the request started, same forms; ts = start + duration when no `ts` is mapped |

`uri` or `header` is required. Numbers may be JSON numbers or numeric strings. Text
before the first `{` of a line (a logging prefix) is ignored. A line that is not a JSON
object, that is longer than MAX_LINE_CHARS, whose duration is missing or is not a finite
number from 0 to MAX_DURATION_S (`1e400`, a 400-digit integer), or whose status is a
number outside 100-999 does not parse. Other times that are not finite read as None.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pinchpoint.logformats.base import STATUS_CODES, FormatError, Record, parse_iso_time
from pinchpoint.logformats.parsing import FormatParser, after_prefix
from pinchpoint.logformats.values import duration, finite

# A decimal number: its digits, then a power of ten (of at most 9 digits).
_NUMERIC = re.compile(r"(-?\d+(?:\.\d+)?)(?:[eE]([+-]?\d{1,9}))?")
_DIGIT_STRING = re.compile(r"\d{1,20}")
_SCALES = {"s": 0, "ms": -3, "us": -6}  # decimal exponents
_TIMES = ("duration", "upstream", "ts", "start")
FIELDS = (
    "uri",
    "header",
    "status",
    *(f"{time}_{unit}" for time in ("duration", "upstream") for unit in _SCALES),
    "ts",
    "ts_ms",
    "ts_us",
    "start",
    "start_ms",
    "start_us",
)


def _unit_exponent(field: str) -> int:
    if field in ("ts", "start"):
        return 0
    return _SCALES[field.rsplit("_", 1)[1]]


def lookup(data: object, path: str) -> object:
    """The value at a dotted path (None if absent); literal keys with dots win."""
    if isinstance(data, Mapping):
        if path in data:
            return data[path]
        for at in range(len(path)):
            if path[at] == "." and path[:at] in data:
                found = lookup(data[path[:at]], path[at + 1 :])
                if found is not None:
                    return found
        return None
    if isinstance(data, list):
        head, _, rest = path.partition(".")
        if head.isdigit() and int(head) < len(data):
            return data[int(head)] if not rest else lookup(data[int(head)], rest)
    return None


def _scaled(value: object, exponent: int) -> float | None:
    """A JSON number or numeric string times 10**exponent, correctly rounded; None for
    anything else. A huge number gives inf, never an error."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        text = repr(value)  # `1.5e-05`, `inf` or `nan`, which _NUMERIC refuses
    elif isinstance(value, int):
        # A number of many digits (JSON has no limit) is more than any time.
        text = str(value) if value.bit_length() <= 64 else ("-1e400" if value < 0 else "1e400")
    elif isinstance(value, str):
        text = value.strip()
    else:
        return None
    match = _NUMERIC.fullmatch(text)
    if match is None:
        return None
    mantissa, power = match.groups()
    return float(f"{mantissa}e{int(power or 0) + exponent}")


def _amount(value: object, exponent: int) -> float | None:
    """A duration: a number (or numeric string) in its unit, from 0 to MAX_DURATION_S."""
    return duration(_scaled(value, exponent))


def _time(value: object, exponent: int) -> float | None:
    """A time: unix time in its unit, or an ISO 8601 string; None if not finite."""
    seconds = _scaled(value, exponent)
    if seconds is None and isinstance(value, str):
        return parse_iso_time(value)
    return finite(seconds)


def _status(value: object) -> int | bool | None:
    """The status of a logged value: None if there is none or it is not a number, False
    if it is a number outside 100-999."""
    if isinstance(value, str) and _DIGIT_STRING.fullmatch(value):
        value = int(value)
    elif isinstance(value, str) and value.isdigit():
        return False  # more digits than any status
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value if value in STATUS_CODES else False


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):  # query fields as an object
        return "&".join(f"{key}={item}" for key, item in value.items())
    return None


def parse_mapping(mapping: str) -> dict[str, str]:
    """The `field=path` pairs of a mapping string, checked."""
    fields: dict[str, str] = {}
    for item in mapping.split(","):
        if not item.strip():
            continue
        field, sep, path = item.partition("=")
        field, path = field.strip(), path.strip()
        if not sep or not path:
            raise FormatError(f"jsonlines mapping item {item.strip()!r} is not field=path")
        if field not in FIELDS:
            raise FormatError(
                f"jsonlines mapping has unknown field {field!r}; known fields: {', '.join(FIELDS)}"
            )
        if field in fields:
            raise FormatError(f"jsonlines mapping gives {field!r} twice")
        fields[field] = path
    for time in _TIMES:
        given = [field for field in fields if field.split("_")[0] == time]
        if len(given) > 1:
            raise FormatError(f"jsonlines mapping gives {time} twice: {', '.join(given)}")
    if not any(field.startswith("duration_") for field in fields):
        raise FormatError(
            "jsonlines mapping has no duration_s, duration_ms or duration_us, so it gives no duration"
        )
    if "uri" not in fields and "header" not in fields:
        raise FormatError("jsonlines mapping has no uri or header, so it gives no tag")
    return fields


@dataclass(frozen=True)
class JsonLinesParser(FormatParser):
    log_format: str
    fields: dict[str, str]  # field -> path

    def _get(self, data: dict[str, Any], prefix: str) -> tuple[object, int] | None:
        for field, path in self.fields.items():
            if field == prefix or field.startswith(prefix + "_"):
                return lookup(data, path), _unit_exponent(field)
        return None

    def read(self, line: str) -> Record | None:
        data = after_prefix(line)
        if data is None:
            return None
        found = self._get(data, "duration")
        seconds = None if found is None else _amount(*found)
        if seconds is None:
            return None
        found = self._get(data, "upstream")
        upstream = None if found is None else _amount(*found)
        status = _status(lookup(data, self.fields["status"])) if "status" in self.fields else None
        if status is False:
            return None
        return Record(
            duration_s=seconds,
            upstream_s=upstream,
            status=status,
            ts=self._ts(data, seconds),
            target=self._field_text(data, "uri") or "",
            tag_header=self._field_text(data, "header"),
        )

    def _field_text(self, data: dict[str, Any], field: str) -> str | None:
        return _text(lookup(data, self.fields[field])) if field in self.fields else None

    def _ts(self, data: dict[str, Any], duration: float) -> float | None:
        found = self._get(data, "ts")
        if found is not None:
            return _time(*found)
        found = self._get(data, "start")
        if found is not None:
            begin = _time(*found)
            return None if begin is None else begin + duration
        return None


def parser_for(log_format: str | None) -> JsonLinesParser:
    """The parser for a field mapping; jsonlines has no default mapping."""
    if log_format is None or not log_format.strip():
        raise FormatError(
            "the jsonlines format needs a field mapping as its log_format, "
            "e.g. 'uri=request.path,duration_ms=latency,status=code'"
        )
    return JsonLinesParser(log_format, parse_mapping(log_format))
