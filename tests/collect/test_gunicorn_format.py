import pytest

from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT, compile_format, parser_for
from pinchpoint.logformats.tag import Tag, find_tag, parse_header

TS_0915_UTC = 1795338900.0  # 22/Nov/2026:10:15:00 +0100


def test_default_format_duration_in_microseconds() -> None:
    line = (
        '127.0.0.1 [22/Nov/2026:10:15:00 +0100] "GET /sys_perf_check?cpu=2&pp_run=r1&pp_users=4'
        '&pp_req=17 HTTP/1.0" 200 2 10250'
    )
    record = parser_for(None).parse(line)
    assert record is not None
    assert record.duration_s == pytest.approx(0.01025)
    assert record.upstream_s is None
    assert record.status == 200
    assert record.ts == TS_0915_UTC
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_default_format_with_dash_body_size() -> None:
    line = '127.0.0.1 [22/Nov/2026:10:15:00 +0100] "GET / HTTP/1.1" 304 - 99'
    record = compile_format(GUNICORN_FORMAT).parse(line)
    assert record is not None
    assert record.duration_s == pytest.approx(0.000099)
    assert record.status == 304
    assert find_tag(record.target) is None


@pytest.mark.parametrize(
    ("fmt", "value", "seconds"),
    [("%(M)s", "125", 0.125), ("%(L)s", "0.125000", 0.125), ("%(D)s", "125000", 0.125)],
)
def test_duration_atoms(fmt: str, value: str, seconds: float) -> None:
    record = parser_for(f"%(s)s {fmt}").parse(f"200 {value}")
    assert record is not None
    assert record.duration_s == pytest.approx(seconds)


def test_microseconds_win_over_milliseconds() -> None:
    record = parser_for("%(M)s %(D)s").parse("12 12345")
    assert record is not None
    assert record.duration_s == pytest.approx(0.012345)


def test_path_and_query_atoms_give_the_tag_and_quoted_agent_keeps_spaces() -> None:
    fmt = '%(h)s %(l)s %(u)s %(t)s "%(m)s %(U)s" %(q)s %(s)s "%(a)s" %(D)s %(p)s %%'
    line = (
        '10.0.0.1 - - [22/Nov/2026:10:15:00 +0100] "GET /api/x" pp_run=r2&pp_users=8&pp_req=5 201 '
        '"python-urllib/3.11 (say \\"hi\\")" 1500 <4242> %'
    )
    record = parser_for(fmt).parse(line)
    assert record is not None
    assert record.status == 201
    assert record.duration_s == pytest.approx(0.0015)
    assert find_tag(record.target) == Tag("r2", 8, 5)


def test_header_atom_gives_the_tag_header() -> None:
    record = parser_for('%(D)s "%({X-Pinchpoint}i)s"').parse('100 "run=r3; users=1; req=2"')
    assert record is not None
    assert record.tag_header is not None
    assert parse_header(record.tag_header) == Tag("r3", 1, 2)


def test_format_without_duration_is_refused_by_parser_for() -> None:
    with pytest.raises(ValueError, match=r"%\(D\)s"):
        parser_for('%(h)s "%(r)s" %(s)s %(T)s')


def test_garbage_does_not_parse() -> None:
    parser = parser_for(None)
    assert parser.parse("[2026-11-22 10:15:00 +0000] [7] [INFO] Booting worker") is None
    assert parser.parse('127.0.0.1 [bad time] "GET / HTTP/1.1" 200 2 10') is None
