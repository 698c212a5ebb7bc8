"""Envoy access log lines, from Envoy's documented default format (Envoy is not packaged
for Debian, so there is no real-program test)."""

from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component
from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.envoy import ENVOY_FORMAT, EnvoyParser, compile_format
from pinchpoint.logformats.tag import Tag, find_tag, parse_header

SAMPLES = Path(__file__).parent / "samples"
START = 1795338900.31  # 2026-11-22T09:15:00.310Z

# The documentation's example line, with a tag in the path.
DOC_LINE = (
    '[2026-11-22T09:15:00.310Z] "POST /api/v1/locations?pp_run=r1&pp_users=4&pp_req=17 HTTP/2" '
    '204 - 154 0 226 100 "10.0.35.28" "nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" '
    '"locations" "tcp://10.0.2.1:80"'
)


def test_default_format_line() -> None:
    parser = get_parser("envoy")
    assert isinstance(parser, EnvoyParser)
    assert parser.log_format == ENVOY_FORMAT
    record = parser.parse(DOC_LINE)
    assert record is not None
    assert record.duration_s == 0.226
    assert record.upstream_s == 0.1
    assert record.status == 204
    assert record.ts == pytest.approx(START + 0.226)
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_no_upstream_and_no_response() -> None:
    line = (
        '[2026-11-22T09:15:00.310Z] "GET /x?pp_run=r1&pp_users=2&pp_req=3 HTTP/1.1" 503 UF,URX '
        '0 91 5 - "-" "curl/8.1 (x86_64; linux)" "abc" "app" "10.0.2.1:80"'
    )
    record = get_parser("envoy").parse(line)
    assert record is not None
    assert (record.duration_s, record.upstream_s, record.status) == (0.005, None, 503)
    reset = line.replace(" 503 UF,URX ", " 0 DC ")
    record = get_parser("envoy").parse(reset)
    assert record is not None
    assert record.status is None


def test_custom_format_with_header_epoch_start_and_lengths() -> None:
    fmt = (
        "%START_TIME(%s)% %REQ(:METHOD)% %REQ(:PATH):64% %RESPONSE_CODE% %DURATION% "
        '%RESPONSE_DURATION% "%REQ(x-pinchpoint)%" %RESP(x-envoy-upstream-service-time)%\n'
    )
    parser = get_parser("envoy", fmt)
    record = parser.parse('1795338900 GET /p 200 12 9 "run=r1; users=8; req=5" 7')
    assert record is not None
    assert record.duration_s == 0.012
    assert record.upstream_s == 0.007
    assert record.ts == pytest.approx(1795338900.012)
    assert find_tag(record.target) is None
    assert record.tag_header is not None
    assert parse_header(record.tag_header) == Tag("r1", 8, 5)


def test_start_time_with_a_strftime_format_gives_no_ts() -> None:
    record = get_parser("envoy", "[%START_TIME(%Y/%m/%dT%H:%M:%S%z)%] %DURATION%").parse(
        "[2026/11/22T09:15:00+0000] 3"
    )
    assert record is not None
    assert record.duration_s == 0.003
    assert record.ts is None


def test_format_without_duration_or_operators_is_refused() -> None:
    with pytest.raises(FormatError, match="%DURATION%"):
        get_parser("envoy", "%REQ(:PATH)% %RESPONSE_CODE%")
    with pytest.raises(FormatError, match="no %OPERATOR%"):
        compile_format("plain")


@pytest.mark.parametrize(
    "line",
    [
        "[2026-11-22 09:15:00.310][1][info][main] starting main dispatch loop",
        DOC_LINE.replace(" 226 ", " slow "),
        DOC_LINE[:60],
        # Envoy does not escape quotes: a quoted value holding one does not parse.
        DOC_LINE.replace('"nsq2http"', '"say "hi""'),
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("envoy").parse(line) is None


def test_documented_samples_through_collect_component() -> None:
    path = SAMPLES / "envoy.log"
    rows, counts = collect_component("edge", path, get_parser("envoy"), "r1", None)
    assert counts == FileCounts(
        component="edge",
        path=str(path),
        lines=6,
        matched=3,
        other_run=1,
        untagged=1,
        unparseable=1,
        unparseable_lines=[1],
    )
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (2, 2, 200),
        (4, 3, 503),
    ]
    assert [(row.duration_s, row.upstream_s) for row in rows] == [
        (0.012, 0.01),
        (0.051, 0.05),
        (0.002, None),
    ]
    assert rows[0].ts == pytest.approx(START + 0.012)
