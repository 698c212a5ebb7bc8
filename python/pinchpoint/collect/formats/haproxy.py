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
"""

import re
from dataclasses import dataclass

from pinchpoint.collect.formats.base import FormatError, Record
from pinchpoint.collect.formats.clock import local_timestamp, month_number, scaled
from pinchpoint.collect.tag import parse_header

_LINE = re.compile(
    r"(?P<client>\S+):\d+ "
    r"\[(?P<date>\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2}(?:\.\d{3})?)\] "
    r"\S+ [^\s/]+/\S+ "  # frontend backend/server
    r"(?P<tq>-?\d+)/(?P<tw>-?\d+)/(?P<tc>-?\d+)/(?P<tr>-?\d+)/\+?(?P<ta>-?\d+) "
    r"(?P<status>-?\d+) \+?-?\d+ \S+ \S+ \S+ "  # status bytes cookies termination-state
    r"\d+/\d+/\d+/\d+/\+?\d+ \d+/\d+ "  # connection counts, queues
    r"(?P<captures>(?:\{[^}]*\} ){0,2})"
    r'"(?P<request>.*)"'
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
class HaproxyParser:
    log_format: str = "httplog"

    @property
    def gives_duration(self) -> bool:
        return True

    def parse(self, line: str) -> HaproxyRecord | None:
        match = _LINE.search(line)
        if match is None:
            return None
        duration = _seconds(match.group("ta"))
        start = parse_date(match.group("date"))
        status = int(match.group("status"))
        return HaproxyRecord(
            duration_s=duration,
            upstream_s=_seconds(match.group("tr")),
            status=status if status > 0 else None,
            ts=None if start is None else start + (duration or 0.0),
            target=match.group("request"),
            tag_header=_captured_tag_header(match.group("captures")),
            queue_s=_seconds(match.group("tw")),
        )


def parser_for(log_format: str | None) -> HaproxyParser:
    if log_format is not None and log_format.strip().lower() != "httplog":
        raise FormatError(
            "the haproxy format reads `option httplog` lines; give no log_format "
            f"(or 'httplog'), not {log_format!r}"
        )
    return HaproxyParser()
