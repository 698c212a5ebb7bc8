"""Envoy access logs: a format string of command operators (`%DURATION%`, `%REQ(:PATH)%`...).

Without a log_format, Envoy's default format string (ENVOY_FORMAT):

    [2026-11-22T09:15:00.310Z] "GET /p?pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1" 200 - 0 2 12 10
    "-" "curl/8.1" "cc21d9b0-..." "app" "127.0.0.1:8080"

A custom `format` string compiles the same way: one regex group per operator,
`%OPERATOR%`, `%OPERATOR(argument)%` or `%OPERATOR(argument):length%`. What pinchpoint
reads from a line:

- duration_s from `%DURATION%` (milliseconds);
- upstream_s from `%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%` (milliseconds; `-` when no
  upstream answered);
- status from `%RESPONSE_CODE%` (0, no response, gives None);
- ts = `%START_TIME%` (default or `%s` format) plus the duration;
- the tag from `%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%` or any `%REQ(...)%` of the path,
  or the header `%REQ(X-PINCHPOINT)%`.

Envoy logs `-` for an empty value and does not escape quotes: a quoted header value
that holds `"` makes its line unparseable. JSON access logs (`json_format`) are read
by the `jsonlines` format. A line longer than MAX_LINE_CHARS, a duration beyond
MAX_DURATION_S or a status other than 0 outside 100-999 does not parse; the regex is
built as `template.py` says, so a line costs time linear in its length.
"""

import re

from pinchpoint.logformats.base import ANY, INT, STATUS_CODES, WORD, Record, parse_iso_time
from pinchpoint.logformats.clock import scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, text_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.template import TEXT_ANY, TEXT_WORD
from pinchpoint.logformats.values import duration, ended, logged, to_int

ENVOY_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% "
    '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" '
    '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n'
)

_OPERATOR = re.compile(r"%([A-Z][A-Z0-9_]*)(?:\(([^)]*)\))?(?::(\d+))?%")
_NUMBER_OR_DASH = rf"(?:{INT}|-)"
_START_TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})"
_SERVICE_TIME = "RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)"
_HEADER = "REQ(X-PINCHPOINT)"


def _operator_key(name: str, argument: str | None) -> str:
    if argument is None or (name == "START_TIME" and argument == "%s"):
        return name
    if name in ("REQ", "RESP", "TRAILER"):
        argument = argument.upper()  # header names are case-insensitive
    return f"{name}({argument})"


def _is_path(key: str) -> bool:
    return key.startswith("REQ(") and "PATH" in key


def _operator_pattern(
    name: str, key: str, argument: str | None, quoted: bool
) -> tuple[str, str | None]:
    """The pattern of an operator, and its kind of text (None if typed; see `template.py`)."""
    if name == "START_TIME":
        if argument is None:
            return _START_TIME, None
        return (INT, None) if argument == "%s" else (ANY, TEXT_ANY)
    if name == "RESPONSE_CODE" or key == _SERVICE_TIME:
        return _NUMBER_OR_DASH, None
    if "DURATION" in name or "BYTES" in name or name == "UPSTREAM_REQUEST_ATTEMPT_COUNT":
        return _NUMBER_OR_DASH, None
    if name == "PROTOCOL" or _is_path(key) or key == "REQ(:METHOD)":
        return WORD, TEXT_WORD
    return text_pattern(quoted, name not in ("REQ", "RESP", "TRAILER"))


class EnvoyParser(FieldsParser):
    DURATION_KEYS = ("DURATION",)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = _millis(values.get("DURATION"))
        status = to_int(values.get("RESPONSE_CODE"))
        if seconds is not None and duration(seconds) is None:
            return None
        if status and status not in STATUS_CODES:
            return None  # 0 is Envoy's mark for no response
        return Record(
            duration_s=seconds,
            upstream_s=duration(_millis(values.get(_SERVICE_TIME))),
            status=status if status else None,
            ts=ended(_start(values.get("START_TIME")), seconds),
            target=" ".join(value for key, value in values.items() if _is_path(key)),
            tag_header=logged(values.get(_HEADER)),
        )


def _millis(text: str | None) -> float | None:
    return scaled(text, -3)


def _start(text: str | None) -> float | None:
    if text is None:
        return None
    if text.isdigit():
        return float(text)
    return parse_iso_time(text)


def _field(match: re.Match[str], quoted: bool) -> Field:
    name, argument, _length = match.groups()
    key = _operator_key(name, argument)
    return Field(key, *_operator_pattern(name, key, argument, quoted))


def compile_format(format_string: str) -> EnvoyParser:
    """Compile an Envoy access log format string into a line parser."""
    fmt = format_string.removesuffix("\n").removesuffix("\\n")
    no_field = f"Envoy access log format has no %OPERATOR%: {format_string!r}"
    return EnvoyParser(format_string, *compile_fields(fmt, _OPERATOR, _field, "o{index}", no_field))


def parser_for(log_format: str | None) -> EnvoyParser:
    """The parser for a format string (default ENVOY_FORMAT); it must log %DURATION%."""
    return with_duration(
        compile_format(ENVOY_FORMAT if log_format is None else log_format),
        "Envoy access log format has no %DURATION%, so it gives no duration; add it",
    )
