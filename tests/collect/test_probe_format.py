import pytest

from pinchpoint.logformats.probe import parser_for
from pinchpoint.logformats.tag import Tag, find_tag


def test_probe_line() -> None:
    line = (
        '{"ts": 1795338900.5, "method": "GET", "uri": "/sys_perf_check?cpu=2&pp_run=r1'
        '&pp_users=4&pp_req=17", "status": 200, "duration_s": 0.0102}'
    )
    record = parser_for(None).parse(line)
    assert record is not None
    assert record.ts == 1795338900.5
    assert record.duration_s == 0.0102
    assert record.status == 200
    assert record.upstream_s is None
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_probe_line_after_a_logging_prefix() -> None:
    line = 'INFO:pinchpoint.probe:{"uri": "/x", "duration_s": 1, "status": 500}'
    record = parser_for(None).parse(line)
    assert record is not None
    assert record.duration_s == 1.0
    assert record.status == 500
    assert record.ts is None


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "{broken",
        "[1, 2]",
        '{"uri": "/x"}',
        '{"duration_s": 0.1}',
        '{"uri": "/x", "duration_s": "0.1"}',
        '{"uri": "/x", "duration_s": true}',
        '{"uri": "/x", "duration_s": NaN}',
    ],
)
def test_lines_without_uri_or_numeric_duration_do_not_parse(line: str) -> None:
    assert parser_for(None).parse(line) is None


def test_probe_takes_no_format_string() -> None:
    with pytest.raises(ValueError, match="fixed format"):
        parser_for("%(D)s")
