import pytest

from pinchpoint.logformats.nginx import (
    COMBINED_FORMAT,
    NGINX_FORMAT,
    compile_format,
    parser_for,
    sum_upstream,
)
from pinchpoint.logformats.tag import Tag, find_tag

# 22/Nov/2026:10:15:00 +0100 is 09:15:00 UTC.
TS_0915_UTC = 1795338900.0


def test_pinchpoint_format_line_with_upstream() -> None:
    line = (
        '127.0.0.1 [22/Nov/2026:10:15:00 +0100] "GET /sys_perf_check?cpu=2&pp_run=r1&pp_users=4'
        '&pp_req=17 HTTP/1.1" 200 2 rt=0.012 urt=0.010 uct=0.001 uht=0.009 msec=1795338900.123'
    )
    record = compile_format(NGINX_FORMAT).parse(line)
    assert record is not None
    assert record.duration_s == 0.012
    assert record.upstream_s == 0.010
    assert record.status == 200
    assert record.ts == 1795338900.123
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_pinchpoint_format_line_without_upstream() -> None:
    line = (
        '10.0.0.9 [22/Nov/2026:10:15:00 +0100] "GET /ok HTTP/1.1" 404 153 rt=0.000 urt=- uct=- '
        "uht=- msec=1795338900.000"
    )
    record = compile_format(NGINX_FORMAT).parse(line)
    assert record is not None
    assert record.duration_s == 0.0
    assert record.upstream_s is None
    assert record.status == 404
    assert find_tag(record.target) is None


def test_combined_format_parses_but_gives_no_duration() -> None:
    line = (
        '192.168.1.5 - alice [22/Nov/2026:10:15:00 +0100] "GET /a?pp_run=r1&pp_users=2&pp_req=9 '
        'HTTP/1.1" 200 512 "https://example.com/a b" "Mozilla/5.0 (X11; Linux x86_64) curl/8.1"'
    )
    parser = compile_format(COMBINED_FORMAT)
    record = parser.parse(line)
    assert record is not None
    assert record.status == 200
    assert record.ts == TS_0915_UTC  # from $time_local, no $msec
    assert record.duration_s is None
    assert record.upstream_s is None
    assert find_tag(record.target) == Tag("r1", 2, 9)
    assert parser.gives_duration is False


def test_combined_format_groups_hold_quoted_fields_with_spaces() -> None:
    line = (
        '192.168.1.5 - - [22/Nov/2026:10:15:00 +0100] "GET / HTTP/1.1" 200 0 "-" '
        '"agent with \\x22quotes\\x22 and spaces"'
    )
    match = compile_format(COMBINED_FORMAT).regex.fullmatch(line)
    assert match is not None
    assert match.group("v_remote_user") == "-"
    assert match.group("v_http_user_agent") == "agent with \\x22quotes\\x22 and spaces"


def test_pinchpoint_parser_refuses_a_format_without_request_time() -> None:
    with pytest.raises(ValueError, match=r"\$request_time"):
        parser_for(COMBINED_FORMAT)


CUSTOM = (
    '${remote_addr}|$time_local|"$request"|$status|${request_time}s|"$upstream_response_time"'
    '|"$http_user_agent"|$upstream_addr|$args'
)


@pytest.mark.parametrize(
    ("upstream", "expected"),
    [
        ("0.010, 0.020", 0.030),
        ("0.010 : 0.020", 0.030),
        ("0.010, 0.020 : 0.005", 0.035),
        ("0.004", 0.004),
        ("-", None),
        ("-, 0.020", 0.020),
    ],
)
def test_custom_format_with_quoted_fields_and_retry_lists(
    upstream: str, expected: float | None
) -> None:
    line = (
        f'10.1.2.3|22/Nov/2026:10:15:00 +0100|"POST /api/x?pp_run=r9&pp_users=16&pp_req=4 HTTP/2.0"'
        f'|502|1.250s|"{upstream}"|"Agent/1.0 (compatible; x y)"|127.0.0.1:8001, 127.0.0.1:8002'
        "|pp_run=r9&pp_users=16&pp_req=4"
    )
    parser = parser_for(CUSTOM)
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 1.25
    if expected is None:
        assert record.upstream_s is None
    else:
        assert record.upstream_s == pytest.approx(expected)
    assert record.status == 502
    assert record.ts == TS_0915_UTC
    assert find_tag(record.target) == Tag("r9", 16, 4)


def test_line_of_another_format_does_not_parse() -> None:
    parser = compile_format(NGINX_FORMAT)
    assert parser.parse("garbage") is None
    assert parser.parse("") is None
    assert parser.parse('{"uri": "/x", "duration_s": 1}') is None


def test_repeated_variable_compiles() -> None:
    parser = compile_format("$request_time $status $request_time")
    record = parser.parse("0.5 200 0.5")
    assert record is not None
    assert record.duration_s == 0.5


def test_header_variable_gives_the_tag_header() -> None:
    parser = compile_format('$request_time "$http_x_pinchpoint"')
    record = parser.parse('0.1 "run=r1; users=2; req=3"')
    assert record is not None
    assert record.tag_header == "run=r1; users=2; req=3"


def test_format_without_variables_is_refused() -> None:
    with pytest.raises(ValueError, match="no \\$variable"):
        compile_format("just text")


def test_sum_upstream() -> None:
    assert sum_upstream(None) is None
    assert sum_upstream("-") is None
    assert sum_upstream("- : -") is None
    assert sum_upstream("0.100, 0.200 : 0.300") == pytest.approx(0.6)
