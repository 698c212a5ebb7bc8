"""Tomcat AccessLogValve lines: lines a real Tomcat 10.1 wrote, and a Tomcat started here."""

import pytest

from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.tag import Tag, find_tag, parse_header
from pinchpoint.logformats.tomcat import TOMCAT_FORMAT

# As written in server.xml, and what a Tomcat 10.1.60 logged with it for a JSP that slept
# 150 ms, then for one that answered 503 at once.
XML_PATTERN = (
    "%h %l %u %t &quot;%r&quot; %s %b %D %T %F %{ms}T %{us}T %{X-Pinchpoint}i "
    "%{begin:msec}t %{end:msec}t %U%q"
)
SLEPT = (
    '127.0.0.1 - - [28/Nov/2026:22:37:39 +0000] "GET /slow.jsp?ms=150&pp_run=r1&pp_users=2'
    '&pp_req=7 HTTP/1.1" 200 3 152590 0 152 152 152590 - 1795905459256 1795905459409 '
    "/slow.jsp?ms=150&pp_run=r1&pp_users=2&pp_req=7"
)
HEADER = (
    '127.0.0.1 - - [28/Nov/2026:22:37:39 +0000] "GET /slow.jsp?code=503 HTTP/1.1" 503 3 853 '
    "0 0 0 853 run=r1; users=2; req=8 1795905459420 1795905459421 /slow.jsp?code=503"
)


def test_microseconds_of_tomcat_10_and_its_end_time() -> None:
    parser = get_parser("tomcat", XML_PATTERN)
    record = parser.parse(SLEPT)
    assert record is not None
    assert record.duration_s == 0.15259  # %D: microseconds in Tomcat 10
    assert record.status == 200
    assert record.ts == 1795905459.409  # %{end:msec}t
    assert find_tag(record.target) == Tag("r1", 2, 7)
    header = parser.parse(HEADER)
    assert header is not None and header.tag_header is not None
    assert (header.status, header.duration_s) == (503, 0.000853)
    assert parse_header(header.tag_header) == Tag("r1", 2, 8)


def test_plain_time_is_when_the_request_ended() -> None:
    # Tomcat 10.1 logged %t 22:37:50 for a request of 1.5 s that began at 22:37:49.017.
    record = get_parser("tomcat", "%t %D").parse("[28/Nov/2026:22:37:50 +0000] 1501203")
    assert record is not None
    assert record.ts == 1795905470.0
    begun = get_parser("tomcat", "%{begin:msec}t %D").parse("1795905469017 1501203")
    assert begun is not None
    assert begun.ts == pytest.approx(1795905470.518203)


@pytest.mark.parametrize(
    ("pattern", "value", "seconds"),
    [("%{ms}T", "152", 0.152), ("%{ns}T", "1500", 1.5e-06), ("%{fracsec}T", "1.512", 1.512),
     ("%T", "2", 2.0)],
)  # fmt: skip
def test_time_taken_in_each_unit(pattern: str, value: str, seconds: float) -> None:
    record = get_parser("tomcat", f"%s {pattern}").parse(f"200 {value}")
    assert record is not None
    assert record.duration_s == seconds


def test_path_and_query_where_tomcat_logs_a_dash_for_no_query() -> None:
    parser = get_parser("tomcat", "%m %U%q %s %D")
    record = parser.parse("GET /a?pp_run=r1&pp_users=2&pp_req=3 200 15")
    assert record is not None and find_tag(record.target) == Tag("r1", 2, 3)
    assert parser.parse("GET /static.txt- 200 15") is not None


def test_named_patterns_and_patterns_without_a_time_are_refused() -> None:
    with pytest.raises(FormatError, match=r"'common' pattern logs no duration.*%D"):
        get_parser("tomcat", "common")
    with pytest.raises(FormatError, match="'combined' pattern logs no duration"):
        get_parser("tomcat", "combined")
    with pytest.raises(FormatError, match="no %D or %T"):
        get_parser("tomcat", '%h %l %u %t "%r" %s %b')
    assert get_parser("tomcat").log_format == TOMCAT_FORMAT


@pytest.mark.parametrize(
    "line",
    [
        '127.0.0.1 - - [28/Nov/2026:22:37:39 +0000] "GET / HTTP/1.1" 200 3 fast',
        "28-Nov-2026 22:37:35.120 INFO [main] org.apache.catalina.startup.Catalina.start",
        "",
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("tomcat").parse(line) is None
