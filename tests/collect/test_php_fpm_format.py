"""PHP-FPM access.format lines: lines a real PHP-FPM 8.2 wrote, and a PHP-FPM started here
behind nginx."""

import pytest

from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.php_fpm import PHP_FPM_FORMAT
from pinchpoint.logformats.tag import Tag, find_tag, parse_header

# As written inside the quotes of the pool file, then what PHP-FPM 8.2.36 logged with it
# for a script that slept 120 ms, and for one with the tag in its header.
POOL_FORMAT = (
    '%R - %u %t \\"%m %r%Q%q\\" %s %f %{mili}d %{kilo}M %C%% %{micro}d %d %T '
    "%{%Y-%m-%dT%H:%M:%S%z}t %{HTTP_X_PINCHPOINT}e"
)
SLEPT = (
    '127.0.0.1 -  28/Nov/2026:22:37:22 +0000 "GET /slow.php?ms=120&pp_run=r1&pp_users=2'
    '&pp_req=7" 200 /srv/docs/slow.php 122.693 2048 0.00% 122693 0.123 '
    "28/Nov/2026:22:37:22 +0000 2026-11-28T22:37:22+0000 -"
)
HEADER = (
    '127.0.0.1 -  28/Nov/2026:22:37:22 +0000 "GET /a/b?code=404" 404 /srv/docs/slow.php '
    "0.826 2048 0.00% 826 0.001 28/Nov/2026:22:37:22 +0000 2026-11-28T22:37:22+0000 "
    "run=r1; users=2; req=8"
)


def test_pool_format_of_a_real_php_fpm() -> None:
    parser = get_parser("php-fpm", POOL_FORMAT)
    record = parser.parse(SLEPT)
    assert record is not None
    assert record.duration_s == 0.122693  # %{mili}d, a decimal
    assert record.status == 200
    assert record.ts == 1795905442.0  # %T: when the request ended
    assert find_tag(record.target) == Tag("r1", 2, 7)
    assert record.tag_header is None
    header = parser.parse(HEADER)
    assert header is not None and header.tag_header is not None
    assert (header.status, header.duration_s) == (404, 0.000826)
    assert parse_header(header.tag_header) == Tag("r1", 2, 8)


@pytest.mark.parametrize(
    ("token", "value", "seconds"),
    [("%d", "0.123", 0.123), ("%{seconds}d", "1.500", 1.5), ("%{milli}d", "0.826", 0.000826),
     ("%{milliseconds}d", "12.5", 0.0125), ("%{micro}d", "826", 0.000826),
     ("%{microseconds}d", "1500000", 1.5)],
)  # fmt: skip
def test_durations_in_each_unit(token: str, value: str, seconds: float) -> None:
    record = get_parser("php-fpm", f"%s {token}").parse(f"200 {value}")
    assert record is not None
    assert record.duration_s == seconds


def test_start_time_without_brackets_plus_duration_and_no_query() -> None:
    parser = get_parser("php-fpm")
    record = parser.parse('127.0.0.1 -  28/Nov/2026:22:37:23 +0000 "GET /x" 200 650.000')
    assert record is not None
    assert record.ts == pytest.approx(1795905443.65)  # %t: received, plus the duration
    assert record.target == "/x"
    assert parser.log_format == PHP_FPM_FORMAT


def test_default_format_and_unknown_units_are_refused() -> None:
    with pytest.raises(FormatError, match=r"no %d.*default.*%Q%q"):
        get_parser("php-fpm", '%R - %u %t "%m %r" %s')
    with pytest.raises(FormatError, match=r"%\{hours\}d, which PHP-FPM does not know"):
        get_parser("php-fpm", "%s %{hours}d")


@pytest.mark.parametrize(
    "line",
    [
        '127.0.0.1 -  28/Nov/2026:22:37:23 +0000 "GET /x" 200 fast',
        "[28-Nov-2026 22:37:21] NOTICE: fpm is running, pid 6025",
        "",
    ],
)
def test_other_lines_give_none(line: str) -> None:
    assert get_parser("php-fpm").parse(line) is None
