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
by the `jsonlines` format.
"""

import re
from dataclasses import dataclass

from pinchpoint.collect.formats.base import (
    ANY,
    QUOTED,
    WORD,
    FormatError,
    Record,
    inside_quotes,
    parse_iso_time,
    to_int,
)
from pinchpoint.collect.formats.clock import scaled

ENVOY_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% "
    '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" '
    '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n'
)

_OPERATOR = re.compile(r"%([A-Z][A-Z0-9_]*)(?:\(([^)]*)\))?(?::(\d+))?%")
_NUMBER_OR_DASH = r"(?:\d+|-)"
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


def _operator_pattern(name: str, key: str, argument: str | None, quoted: bool) -> str:
    if name == "START_TIME":
        if argument is None:
            return _START_TIME
        return r"\d+" if argument == "%s" else ANY
    if name == "RESPONSE_CODE" or key == _SERVICE_TIME:
        return _NUMBER_OR_DASH
    if "DURATION" in name or "BYTES" in name or name == "UPSTREAM_REQUEST_ATTEMPT_COUNT":
        return _NUMBER_OR_DASH
    if name == "PROTOCOL" or _is_path(key) or key == "REQ(:METHOD)":
        return WORD
    if quoted:
        return QUOTED
    return ANY if name in ("REQ", "RESP", "TRAILER") else WORD


@dataclass(frozen=True)
class EnvoyParser:
    log_format: str
    regex: re.Pattern[str]
    groups: dict[str, str]  # operator key -> its group name

    @property
    def gives_duration(self) -> bool:
        return "DURATION" in self.groups

    def parse(self, line: str) -> Record | None:
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        values = {key: match.group(group) for key, group in self.groups.items()}
        duration = _millis(values.get("DURATION"))
        status = to_int(values.get("RESPONSE_CODE"))
        start = _start(values.get("START_TIME"))
        header = values.get(_HEADER)
        return Record(
            duration_s=duration,
            upstream_s=_millis(values.get(_SERVICE_TIME)),
            status=status if status else None,
            ts=None if start is None else start + (duration or 0.0),
            target=" ".join(value for key, value in values.items() if _is_path(key)),
            tag_header=header if header not in (None, "-") else None,
        )


def _millis(text: str | None) -> float | None:
    return scaled(text, -3)


def _start(text: str | None) -> float | None:
    if text is None:
        return None
    if text.isdigit():
        return float(text)
    return parse_iso_time(text)


def compile_format(format_string: str) -> EnvoyParser:
    """Compile an Envoy access log format string into a line parser."""
    fmt = format_string.removesuffix("\n").removesuffix("\\n")
    parts: list[str] = []
    literals = ""
    groups: dict[str, str] = {}
    end = 0
    for match in _OPERATOR.finditer(fmt):
        literal = fmt[end : match.start()]
        parts.append(re.escape(literal))
        literals += literal
        end = match.end()
        name, argument, _length = match.groups()
        key = _operator_key(name, argument)
        pattern = _operator_pattern(name, key, argument, inside_quotes(literals))
        if key in groups:
            parts.append(f"(?:{pattern})")
        else:
            groups[key] = f"o{len(groups)}"
            parts.append(f"(?P<{groups[key]}>{pattern})")
    if not groups:
        raise FormatError(f"Envoy access log format has no %OPERATOR%: {format_string!r}")
    parts.append(re.escape(fmt[end:]))
    return EnvoyParser(format_string, re.compile("".join(parts)), groups)


def parser_for(log_format: str | None) -> EnvoyParser:
    """The parser for a format string (default ENVOY_FORMAT); it must log %DURATION%."""
    parser = compile_format(ENVOY_FORMAT if log_format is None else log_format)
    if not parser.gives_duration:
        raise FormatError(
            "Envoy access log format has no %DURATION%, so it gives no duration; add it"
        )
    return parser
