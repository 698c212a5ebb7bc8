"""uWSGI request logs: the default request line, or a `--logformat` string.

Without a log_format, lines are uWSGI's default request line:

    [pid: 1234|app: 0|req: 1/1] 127.0.0.1 () {34 vars in 456 bytes} [Sat Nov 22 03:00:00 2026]
    GET /p?pp_run=r1&pp_users=4&pp_req=17 => generated 12 bytes in 10 msecs (HTTP/1.1 200)
    2 headers in 79 bytes (1 switches on core 0)

(one line), with `in N msecs`, or `in N micros` under `--log-micros`. Text before
`[pid: ` (the `--vhost` host, a `--memory-report` block, a logger's prefix) is ignored.
What pinchpoint reads: duration_s from the msecs or micros, status, the tag from the
URI, and ts = the logged start of the request (one-second resolution, this machine's
local time) plus the duration.

A log_format is a `--logformat` string (`%(method) %(uri) %(status) %(micros)` ...),
compiled into a regex with one group per variable. What pinchpoint reads from it:

- duration_s from `%(micros)`, else `%(msecs)`, else `%(secs)`;
- status from `%(status)`;
- ts from `%(tmicros)` or `%(tmsecs)` (start of the request) plus the duration, else
  `%(epoch)` (when the line was logged), else `%(time)`, `%(ltime)` or `%(ctime)`
  (start, in seconds) plus the duration;
- the tag from `%(uri)`, or the header `%(var.HTTP_X_PINCHPOINT)`.

uWSGI logs `-` for an empty value and escapes nothing; uWSGI gives no upstream time.
Lines that are not request lines (uWSGI's own messages) do not parse, nor do lines longer
than MAX_LINE_CHARS, with a duration beyond MAX_DURATION_S, or with a status other than
0 or -1 (no response) outside 100-999. The regexes are built as `template.py` says, so
a line costs time linear in its length: the default line is read from the first
`[pid: ` that starts a request line.
"""

import re
from dataclasses import dataclass

from pinchpoint.logformats.base import CLF_TIME, INT, STATUS_CODES, Record, parse_clf_time
from pinchpoint.logformats.clock import first_scaled, local_timestamp, month_number, scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import FormatParser, with_duration
from pinchpoint.logformats.values import duration, ended, logged, to_float, to_int

# `ctime` without its newline: `Sat Nov 22 03:00:00 2026`, day padded with a space.
CTIME = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}"
_CTIME = re.compile(r"[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})")

# Three atomic groups (see `template.py`): the prefix up to the first `[pid: ` that
# starts a request line, the user up to the method, the URI up to the end.
_DEFAULT = re.compile(
    rf"(?>.*?\[pid: {INT}\|app: -?{INT}\|req: -?{INT}/{INT}\] (?P<addr>\S*) \()"
    rf"(?>(?P<user>.*?)\) \{{{INT} vars in {INT} bytes\}} \[(?P<ctime>{CTIME})\] "
    r"(?P<method>\S*) )"
    rf"(?>(?P<uri>.*?) => generated {INT} bytes in (?P<time>{INT}) (?P<unit>msecs|micros)"
    rf"(?: via [a-z]+\(\))? \((?P<proto>\S*) (?P<status>-?{INT})\) {INT} headers in "
    rf"{INT} bytes \({INT} switches on core {INT}\)\Z)"
)

_VARIABLE = re.compile(r"%\(([^)]*)\)")
_INTEGER = rf"(?:-?{INT}|-)"
_INTEGERS = {
    "status", "micros", "msecs", "rsize", "hsize", "size", "cl", "epoch", "time", "tmsecs",
    "tmicros", "pid", "wid", "switches", "vars", "core", "vsz", "rss", "vszM", "rssM",
    "pktsize", "modifier1", "modifier2", "headers", "werr", "rerr", "ioerr",
}  # fmt: skip
_TYPED = {
    "secs": rf"(?:{INT}(?:\.{INT})?|-)",
    "ltime": CLF_TIME,
    "ctime": CTIME,
}
_WORDS = {"uri", "method", "addr", "proto"}
_DURATIONS = (("micros", -6), ("msecs", -3), ("secs", 0))  # name, decimal exponent
# Start-of-request times, with their unit, after the precise ones.
_STARTS = (("tmicros", -6), ("tmsecs", -3))
_HEADER = "var.HTTP_X_PINCHPOINT"


def parse_ctime(text: str) -> float | None:
    """Unix seconds of a `ctime` time (`Sat Nov 22 03:00:00 2026`) in local time, or None."""
    match = _CTIME.fullmatch(text)
    if match is None:
        return None
    month, day, hour, minute, second, year = match.groups()
    month_n = month_number(month)
    if month_n is None:
        return None
    return local_timestamp(int(year), month_n, int(day), int(hour), int(minute), int(second))


def _status(code: int | None) -> int | bool | None:
    """The status of a logged code: None for none (`-`, 0 or -1), False if it is no status."""
    if code is None or code in (0, -1):
        return None
    return code if code in STATUS_CODES else False


@dataclass(frozen=True)
class UwsgiDefaultParser(FormatParser):
    """uWSGI's default request line."""

    log_format: None = None

    def read(self, line: str) -> Record | None:
        match = _DEFAULT.fullmatch(line)
        if match is None:
            return None
        exponent = -3 if match.group("unit") == "msecs" else -6
        seconds = duration(scaled(match.group("time"), exponent))
        status = _status(int(match.group("status")))
        if seconds is None or status is False:
            return None
        return Record(
            duration_s=seconds,
            status=status,
            ts=ended(parse_ctime(match.group("ctime")), seconds),
            target=match.group("uri"),
        )


class UwsgiFormatParser(FieldsParser):
    """Lines of a `--logformat` string."""

    DURATION_KEYS = tuple(name for name, _ in _DURATIONS)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = first_scaled(values, _DURATIONS)
        status = _status(to_int(values.get("status")))
        if status is False or (seconds is not None and duration(seconds) is None):
            return None
        return Record(
            duration_s=seconds,
            status=status,
            ts=_ts(values, seconds),
            target=values.get("uri", ""),
            tag_header=logged(values.get(_HEADER)),
        )


def _ts(values: dict[str, str], seconds: float | None) -> float | None:
    start = first_scaled(values, _STARTS)
    if start is not None:
        return start + (seconds or 0.0)
    epoch = to_float(values.get("epoch"))
    if epoch is not None:
        return epoch
    start = to_float(values.get("time"))
    if start is None and "ltime" in values:
        start = parse_clf_time(values["ltime"])
    if start is None and "ctime" in values:
        start = parse_ctime(values["ctime"])
    return ended(start, seconds)


def _variable_pattern(name: str) -> tuple[str, str | None]:
    """The pattern of a variable, and its kind of text (None if typed; see `template.py`)."""
    if name in _INTEGERS or name.startswith("metric."):
        return _INTEGER, None
    return field_pattern(name, _TYPED, _WORDS, False)


def _field(match: re.Match[str], _quoted: bool) -> Field:
    name = match.group(1)
    return Field(name, *_variable_pattern(name))


def compile_format(logformat: str) -> UwsgiFormatParser:
    """Compile a uWSGI `--logformat` string into a line parser."""
    no_field = f"uWSGI logformat has no %(variable): {logformat!r}"
    fmt = logformat.rstrip("\n")
    return UwsgiFormatParser(
        logformat, *compile_fields(fmt, _VARIABLE, _field, "v{index}", no_field)
    )


def parser_for(log_format: str | None) -> UwsgiDefaultParser | UwsgiFormatParser:
    """The default request line's parser, or a `--logformat` string's; the latter must
    log %(micros), %(msecs) or %(secs)."""
    if log_format is None:
        return UwsgiDefaultParser()
    return with_duration(
        compile_format(log_format),
        "uWSGI logformat has no %(micros), %(msecs) or %(secs), so it gives no duration; "
        "add %(micros)",
    )
