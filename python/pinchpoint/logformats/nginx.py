"""nginx access logs: the `log_format` string itself is the format.

Any log_format compiles into a regex with one named group per variable. What
pinchpoint reads from a line:

- duration_s from `$request_time`;
- upstream_s from `$upstream_response_time`, summed over retries (`0.010, 0.020`)
  and internal redirects (`0.010 : 0.020`); `-` (no upstream) gives None;
- status from `$status`;
- ts from `$msec`, else `$time_local`, else `$time_iso8601`;
- the tag from `$request_uri`, `$request`, `$args` or `$query_string`, or the
  header `$http_x_pinchpoint`.

Numbers have at most 20 digits on either side of the point. A line longer than
MAX_LINE_CHARS does not parse; a duration beyond MAX_DURATION_S reads as None, as does a
status below 100 (nginx logs `000` when it sent no response). The regex is built as
`template.py` says, so that a line costs time linear in its length: a text variable ends
at the first place from which the typed variables and literals after it, up to the next
text variable, match.
"""

import re

from pinchpoint.logformats.base import (
    CLF_TIME,
    INT,
    NUMBER,
    STATUS_CODES,
    Record,
    parse_clf_time,
    parse_iso_time,
)
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, text_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.template import TEXT_ADDRESSES
from pinchpoint.logformats.values import duration, to_float, to_int

# The format pinchpoint configures nginx with (the demo stack uses exactly this).
NGINX_FORMAT = (
    '$remote_addr [$time_local] "$request" $status $body_bytes_sent '
    "rt=$request_time urt=$upstream_response_time uct=$upstream_connect_time "
    "uht=$upstream_header_time msec=$msec"
)
# The same with the X-Pinchpoint header logged: gRPC calls carry the tag in their
# metadata only (a gRPC path takes no query), so a gRPC location needs this one.
NGINX_GRPC_FORMAT = f'{NGINX_FORMAT} tag="$http_x_pinchpoint"'

# nginx's predefined format; it logs no duration, so pinchpoint cannot use it alone.
COMBINED_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent"'
)

_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_]+)\}|\$([A-Za-z0-9_]+)")

_NUMBER_OR_DASH = rf"(?:{NUMBER}|-)"
# Per-upstream values: `, ` separates tries, ` : ` separates upstream groups.
_LIST = rf"{_NUMBER_OR_DASH}(?:\s*[,:]\s*{_NUMBER_OR_DASH})*"
_ADDRESS_LIST = r"\S+?(?:(?:, | : )\S+?)*"
_LIST_SPLIT = re.compile(r"\s*[,:]\s*")
_UPSTREAM_LISTS = {"upstream_status", "upstream_response_length"}

_INT_OR_DASH = rf"(?:{INT}|-)"
_TYPED = {
    "request_time": _NUMBER_OR_DASH,
    "msec": _NUMBER_OR_DASH,
    "connection_time": _NUMBER_OR_DASH,
    "status": r"(?:\d{3}|-)",
    "body_bytes_sent": _INT_OR_DASH,
    "bytes_sent": _INT_OR_DASH,
    "request_length": _INT_OR_DASH,
    "connection": _INT_OR_DASH,
    "connection_requests": _INT_OR_DASH,
    "pid": _INT_OR_DASH,
    "time_local": CLF_TIME,
    "time_iso8601": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[+-]\d{2}:\d{2}|Z)?",
}
# Unquoted variables whose values can hold spaces.
_SPACED_PREFIXES = ("http_", "sent_http_", "upstream_http_", "cookie_")
# The variables that may hold the tag.
_TAGGED = ("request_uri", "request", "args", "query_string")


def _variable_pattern(name: str, quoted: bool) -> tuple[str, str | None]:
    """The pattern of a variable, and its kind of text (None if typed; see `template.py`)."""
    if name in _TYPED:
        return _TYPED[name], None
    if name == "upstream_addr":
        return _ADDRESS_LIST, TEXT_ADDRESSES
    if name in _UPSTREAM_LISTS or name.startswith("upstream_bytes"):
        return _LIST, None
    if name.startswith("upstream_") and name.endswith("_time"):
        return _LIST, None
    return text_pattern(quoted, name != "request" and not name.startswith(_SPACED_PREFIXES))


class NginxParser(FieldsParser):
    """Lines of a log_format; its fields' keys are the variables' names."""

    DURATION_KEYS = ("request_time",)

    @property
    def variables(self) -> frozenset[str]:
        """The names of the variables the log_format logs."""
        return frozenset(self.groups)

    def record(self, values: dict[str, str]) -> Record:
        ts = to_float(values.get("msec"))
        if ts is None and "time_local" in values:
            ts = parse_clf_time(values["time_local"])
        if ts is None and "time_iso8601" in values:
            ts = parse_iso_time(values["time_iso8601"])
        status = to_int(values.get("status"))
        return Record(
            duration_s=duration(to_float(values.get("request_time"))),
            upstream_s=duration(sum_upstream(values.get("upstream_response_time"))),
            status=status if status in STATUS_CODES else None,
            ts=ts,
            target=" ".join(values[name] for name in _TAGGED if name in values),
            tag_header=values.get("http_x_pinchpoint"),
        )


def sum_upstream(text: str | None) -> float | None:
    """Sum of a per-upstream time list (`0.010, 0.020 : 0.005`); None if no value is a time."""
    if text is None or text == "-":
        return None
    if "," not in text and ":" not in text:
        return to_float(text)
    times = [float(item) for item in _LIST_SPLIT.split(text.strip()) if item not in ("-", "")]
    return sum(times) if times else None


def _field(match: re.Match[str], quoted: bool) -> Field:
    name = match.group(1) or match.group(2)
    return Field(name, *_variable_pattern(name, quoted))


def compile_format(log_format: str) -> NginxParser:
    """Compile an nginx `log_format` string into a line parser."""
    no_field = f"nginx log_format has no $variable: {log_format!r}"
    return NginxParser(
        log_format, *compile_fields(log_format, _VARIABLE, _field, "v_{key}", no_field)
    )


def parser_for(log_format: str | None) -> NginxParser:
    """The parser for `log_format` (default NGINX_FORMAT); it must log `$request_time`."""
    return with_duration(
        compile_format(NGINX_FORMAT if log_format is None else log_format),
        "nginx log_format has no $request_time, so it gives no duration; "
        f"add it (pinchpoint's format: {NGINX_FORMAT!r})",
    )
