"""HAProxy HTTP logs (`option httplog`), as HAProxy 1.x and 2.x write them:

    10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750
    - - ---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html?pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1"

(one line). The five timers are TR/Tw/Tc/Tr/Ta in 2.x (Tq/Tw/Tc/Tr/Tt in 1.x), in
milliseconds, `-1` for a phase that never happened (`+` before Ta/Tt under
`option logasap`). Text before the client address (a syslog header such as
`<134>Nov 22 03:00:00 haproxy[123]: `) is ignored, so lines logged to stdout, to a
file through syslog, or with `format raw` all parse. What pinchpoint reads:

- duration_s from Ta (Tt in 1.x): the time HAProxy spent on the request;
- upstream_s from Tr: the server's response time (connection established to full
  response headers); None (-1) when no response came;
- queue_s (a field of HaproxyRecord) from Tw: time waiting in HAProxy's queues for a
  connection slot (`maxconn`); None when the request never got there;
- status; ts = the logged date (this machine's local time, as HAProxy logs no offset)
  plus Ta;
- the tag from the request line, or from a captured request header
  (`capture request header X-Pinchpoint len 128`) holding `run=...; users=...; req=...`.

The log_format is None or `httplog`; custom `log-format` strings are not compiled.
A line longer than MAX_LINE_CHARS, with a duration beyond MAX_DURATION_S or with a status
other than -1 outside 100-999 does not parse. The record starts at the first word that
is followed by `:port [date] ` (atomic groups, as `template.py` says), so a line costs
time linear in its length.
"""

import re
from dataclasses import dataclass

from pinchpoint.logformats.base import INT, STATUS_CODES, FormatError, Record
from pinchpoint.logformats.clock import local_timestamp, month_number, scaled
from pinchpoint.logformats.parsing import FormatParser
from pinchpoint.logformats.tag import parse_header
from pinchpoint.logformats.values import duration, ended

_LINE = re.compile(
    # Text before the client address, which starts a word.
    r"(?>.*?(?<!\S)(?P<client>\S+):\d{1,5} "
    r"\[(?P<date>\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2}(?:\.\d{3})?)\] )"
    r"(?>\S+ [^\s/]+/\S+ )"  # frontend backend/server
    rf"(?P<tq>-?{INT})/(?P<tw>-?{INT})/(?P<tc>-?{INT})/(?P<tr>-?{INT})/\+?(?P<ta>-?{INT}) "
    rf"(?P<status>-?{INT}) \+?-?{INT} "  # status bytes
    r"(?>\S+ \S+ \S+ )"  # cookies termination-state
    rf"{INT}/{INT}/{INT}/{INT}/\+?{INT} {INT}/{INT} "  # connection counts, queues
    r"(?P<captures>(?:\{[^}]*\} ){0,2})"
    r'"(?P<request>.*)"\Z'
)
_DATE = re.compile(r"(\d{2})/([A-Za-z]{3})/(\d{4}):(\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?")
_CAPTURE = re.compile(r"\{([^}]*)\}")


@dataclass(frozen=True, slots=True)
class HaproxyRecord(Record):
    """A Record with HAProxy's queue time Tw, in seconds (None when not reached)."""

    queue_s: float | None = None


def parse_date(text: str) -> float | None:
    """Unix seconds of a HAProxy date (`06/Feb/2009:12:14:14.655`) in local time, or None."""
    match = _DATE.fullmatch(text)
    if match is None:
        return None
    day, month, year, hour, minute, second, millis = match.groups()
    month_n = month_number(month)
    if month_n is None:
        return None
    return local_timestamp(
        int(year), month_n, int(day), int(hour), int(minute), int(second), int(millis or 0) * 1000
    )


def _seconds(millis: str) -> float | None:
    return scaled(millis, -3) if not millis.startswith("-") else None


def _captured_tag_header(captures: str) -> str | None:
    for block in _CAPTURE.findall(captures):
        for value in block.split("|"):
            if "run=" in value and parse_header(value) is not None:
                return value
    return None


@dataclass(frozen=True)
class HaproxyParser(FormatParser):
    log_format: str = "httplog"

    def read(self, line: str) -> HaproxyRecord | None:
        match = _LINE.match(line)
        if match is None:
            return None
        ta = _seconds(match.group("ta"))
        status = int(match.group("status"))
        if (ta is not None and duration(ta) is None) or (
            status != -1 and status not in STATUS_CODES
        ):
            return None
        return HaproxyRecord(
            duration_s=ta,
            upstream_s=duration(_seconds(match.group("tr"))),
            status=status if status > 0 else None,
            ts=ended(parse_date(match.group("date")), ta),
            target=match.group("request"),
            tag_header=_captured_tag_header(match.group("captures")),
            queue_s=duration(_seconds(match.group("tw"))),
        )


def parser_for(log_format: str | None) -> HaproxyParser:
    if log_format is not None and log_format.strip().lower() != "httplog":
        raise FormatError(
            "the haproxy format reads `option httplog` lines; give no log_format "
            f"(or 'httplog'), not {log_format!r}"
        )
    return HaproxyParser()
