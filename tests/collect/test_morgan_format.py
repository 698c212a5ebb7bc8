"""Express's morgan lines: lines a real Express app wrote, and an Express app started here."""

import pytest

from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.morgan import MORGAN_FORMAT
from pinchpoint.logformats.tag import Tag, find_tag, parse_header

# What morgan 1.10 logged in `dev` for a route that waited 120 ms, then answered 503.
DEV = [
    "\x1b[0mGET /slow?ms=120&pp_run=r1&pp_users=2&pp_req=7 \x1b[32m200\x1b[0m 121.295 ms - 3"
    "\x1b[0m",
    "\x1b[0mGET /x?code=503 \x1b[31m503\x1b[0m 1.339 ms - 3\x1b[0m",
]
CUSTOM = ':method :url :status :response-time :total-time[2] :date[iso] ":req[x-pinchpoint]"'


def test_dev_lines_with_their_colours() -> None:
    parser = get_parser("morgan", "dev")
    records = [parser.parse(line) for line in DEV]
    assert [(r.status, r.duration_s) for r in records if r] == [(200, 0.121295), (503, 0.001339)]
    assert records[0] is not None and find_tag(records[0].target) == Tag("r1", 2, 7)


def test_total_time_wins_and_the_date_is_the_end() -> None:
    parser = get_parser("morgan", CUSTOM)
    record = parser.parse('GET / 200 1.548 2.93 2026-11-28T22:38:10.539Z "run=r1; users=1; req=2"')
    assert record is not None
    assert record.duration_s == 0.00293  # :total-time, until the response was sent
    assert record.ts == 1795905490.539
    assert record.tag_header is not None and parse_header(record.tag_header) == Tag("r1", 1, 2)


@pytest.mark.parametrize(
    ("name", "line", "ts"),
    [
        ("short", "127.0.0.1 - GET /a?pp_run=r1&pp_users=1&pp_req=1 HTTP/1.1 200 3 - 4.2 ms",
         None),
        ("tiny", "GET /a?pp_run=r1&pp_users=1&pp_req=1 200 3 - 4.2 ms", None),
        (f"{MORGAN_FORMAT}",
         '127.0.0.1 - - [28/Nov/2026:22:38:09 +0000] "GET /a?pp_run=r1&pp_users=1&pp_req=1 '
         'HTTP/1.1" 200 3 "-" "curl/7.88.1" 4.2', 1795905489.0),
        (":date :response-time :url",
         "Sat, 28 Nov 2026 22:38:10 GMT 4.2 /a?pp_run=r1&pp_users=1&pp_req=1", 1795905490.0),
    ],
)  # fmt: skip
def test_named_and_custom_formats(name: str, line: str, ts: float | None) -> None:
    record = get_parser("morgan", name).parse(line)
    assert record is not None
    assert record.duration_s == 0.0042
    assert record.ts == ts
    assert find_tag(record.target) == Tag("r1", 1, 1)


def test_unfinished_response_has_no_duration() -> None:
    record = get_parser("morgan", "tiny").parse("GET /a - - - - ms")
    assert record is not None
    assert (record.duration_s, record.status) == (None, None)


def test_formats_without_a_time_are_refused() -> None:
    for name in ("combined", "common"):
        with pytest.raises(FormatError, match=f"'{name}' format logs no duration.*:total-time"):
            get_parser("morgan", name)
    with pytest.raises(FormatError, match="no :total-time or :response-time"):
        get_parser("morgan", ":method :url :status")
    with pytest.raises(FormatError, match="clf, iso or web"):
        get_parser("morgan", ":date[unix] :response-time")
    assert get_parser("morgan").log_format == MORGAN_FORMAT


@pytest.mark.parametrize("line", ["GET /a 200 3 - fast ms", "Listening on 3000", ""])
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("morgan", "tiny").parse(line) is None
