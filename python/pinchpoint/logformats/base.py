"""What every log format produces, and pieces shared by the formats."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Protocol

# Longest line a parser reads, in characters (bytes for the ASCII lines servers write).
# A longer line is not parsed, whatever it holds: it counts as unparseable. Every format
# checks it before any regex, so no line costs more than this much work; the Rust nginx
# parser has the same cap (`MAX_PARSE_LINE` in pinchpoint-logs).
MAX_LINE_CHARS = 64 * 1024
# Longest time a request can take, in seconds (a week): a logged duration beyond it, or
# one that is not a finite number, is damage and is not read.
MAX_DURATION_S = 7 * 24 * 3600.0
# HTTP status codes; a logged number outside them is not a status.
STATUS_CODES = range(100, 1000)
# Most digits of a logged integer, and of either side of a decimal point (2^64 has 20).
MAX_DIGITS = 20


class FormatError(ValueError):
    """A log format that cannot be compiled or cannot give what pinchpoint needs."""


@dataclass(frozen=True, slots=True)
class Record:
    """One parsed log line.

    `target` is the text that holds the tag (URI, request line or query string);
    `tag_header` the logged `X-Pinchpoint` header value, when the format logs it.
    `duration_s` is None only when the format does not log a duration.
    """

    duration_s: float | None
    upstream_s: float | None = None
    status: int | None = None
    ts: float | None = None
    target: str = ""
    tag_header: str | None = None


# What a parser gives for a line of its log that holds no request's record (a PostgreSQL
# `DETAIL` line, or another tool's statement's `parse` step): counted as untagged, not as
# unparseable, which is left to lines not in the log's format.
NOT_A_RECORD = Record(duration_s=None)


class LineParser(Protocol):
    @property
    def gives_duration(self) -> bool: ...

    def parse(self, line: str) -> Record | None:
        """The record of one line (without its newline), NOT_A_RECORD for a line in the
        format that holds none, or None if the line does not parse."""
        ...


# Content of a double-quoted field; both nginx (`\x22`) and gunicorn (`\"`) escape quotes.
QUOTED = r'(?:[^"\\]|\\.)*?'
# Any text, possibly with spaces, for unquoted fields that can hold spaces.
ANY = r".*?"
# Text without spaces.
WORD = r"\S*?"
INT = rf"\d{{1,{MAX_DIGITS}}}"
NUMBER = rf"{INT}(?:\.{INT})?"

# Common Log Format time, e.g. `10/Oct/2000:13:55:36 -0700`.
CLF_TIME = r"\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2} [+-]\d{4}"
_CLF_TIME = re.compile(
    r"(\d{2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-])(\d{2})(\d{2})"
)
# Servers write English month names whatever the locale, so strptime's %b is not used.
_MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}


def parse_clf_time(text: str) -> float | None:
    """Unix seconds of a Common Log Format time, or None if it is not one."""
    match = _CLF_TIME.fullmatch(text)
    if match is None:
        return None
    day, month, year, hour, minute, second, sign, off_h, off_m = match.groups()
    month_n = _MONTHS.get(month.lower())
    if month_n is None:
        return None
    offset = timedelta(hours=int(off_h), minutes=int(off_m))
    try:
        # An offset of a day or more (`+2400`) is refused by timezone(): not a time.
        zone = timezone(-offset if sign == "-" else offset)
        when = datetime(
            int(year), month_n, int(day), int(hour), int(minute), int(second), tzinfo=zone
        )
    except ValueError:
        return None
    return when.timestamp()


def parse_iso_time(text: str) -> float | None:
    """Unix seconds of an ISO 8601 time (UTC if it has no offset), or None."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def too_long(line: str) -> bool:
    """Whether a line is longer than MAX_LINE_CHARS, so that it is not parsed."""
    return len(line) > MAX_LINE_CHARS


def inside_quotes(literals_before: str) -> bool:
    """Whether the text after `literals_before` is inside a double-quoted field."""
    return literals_before.count('"') % 2 == 1
