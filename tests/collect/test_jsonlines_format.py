"""JSON lines read through a field mapping."""

import json
from pathlib import Path

import pytest

from pinchpoint.collect.logs.reader import FileCounts, collect_component
from pinchpoint.logformats import FormatError, get_parser
from pinchpoint.logformats.jsonlines import JsonLinesParser, lookup, parse_mapping
from pinchpoint.logformats.tag import Tag, find_tag, parse_header

SAMPLES = Path(__file__).parent / "samples"
BRIEF_MAPPING = "uri=request.path,duration_ms=latency,status=code"


def test_brief_mapping() -> None:
    parser = get_parser("jsonlines", BRIEF_MAPPING)
    assert isinstance(parser, JsonLinesParser)
    line = json.dumps(
        {"request": {"path": "/a?pp_run=r1&pp_users=4&pp_req=17"}, "latency": 12.5, "code": 201}
    )
    record = parser.parse(line)
    assert record is not None
    assert record.duration_s == 0.0125
    assert record.status == 201
    assert record.ts is None
    assert record.upstream_s is None
    assert find_tag(record.target) == Tag("r1", 4, 17)


def test_envoy_json_format_fields_and_a_logging_prefix() -> None:
    mapping = (
        "uri=path, header=pp, duration_ms=duration, upstream_ms=upstream_service_time, "
        "status=response_code, start=start_time"
    )
    line = 'envoy[1]: {"start_time":"2026-11-22T09:15:00.310Z","path":"/x","duration":226,' + (
        '"upstream_service_time":"100","response_code":200,"pp":"run=r1; users=2; req=3"}'
    )
    record = get_parser("jsonlines", mapping).parse(line)
    assert record is not None
    assert record.duration_s == 0.226
    assert record.upstream_s == 0.1  # a numeric string
    assert record.ts == pytest.approx(1795338900.31 + 0.226)
    assert record.tag_header is not None
    assert parse_header(record.tag_header) == Tag("r1", 2, 3)


@pytest.mark.parametrize(
    ("field", "value", "ts"),
    [
        ("ts", 1795338900.5, 1795338900.5),
        ("ts", "2026-11-22T09:15:00.5+00:00", 1795338900.5),
        ("ts", "2026-11-22T09:15:00.5", 1795338900.5),  # no offset: UTC
        ("ts_ms", 1795338900500, 1795338900.5),
        ("ts_us", "1795338900500000", 1795338900.5),
        ("start_ms", 1795338900000, 1795338900.25),
        ("ts", "yesterday", None),
    ],
)
def test_time_fields(field: str, value: object, ts: float | None) -> None:
    parser = get_parser("jsonlines", f"uri=u,duration_s=d,{field}=t")
    record = parser.parse(json.dumps({"u": "/", "d": 0.25, "t": value}))
    assert record is not None
    assert record.ts == (pytest.approx(ts) if ts is not None else None)


def test_durations_in_each_unit_and_query_object() -> None:
    line = json.dumps({"q": {"pp_run": "r1", "pp_users": 8, "pp_req": 5}, "d": 1500, "s": "404"})
    record = get_parser("jsonlines", "uri=q,duration_us=d,status=s").parse(line)
    assert record is not None
    assert record.duration_s == 0.0015
    assert record.status == 404
    assert find_tag(record.target) == Tag("r1", 8, 5)


def test_lookup_paths() -> None:
    data = {"http.status": 200, "a": {"b": [{"c": 1}]}, "x": {"y.z": 2}}
    assert lookup(data, "http.status") == 200
    assert lookup(data, "a.b.0.c") == 1
    assert lookup(data, "x.y.z") == 2
    assert lookup(data, "a.b.5") is None
    assert lookup(data, "nope.no") is None


@pytest.mark.parametrize(
    "line",
    [
        "plain text",
        "[1, 2, 3]",
        '{"u": "/", "d": "slow"}',
        '{"u": "/", "d": -1}',
        '{"u": "/", "d": true}',
        '{"u": "/"}',
        '{"u": "/", "d": 1',
    ],
)
def test_lines_without_a_duration_give_none(line: str) -> None:
    assert get_parser("jsonlines", "uri=u,duration_ms=d").parse(line) is None


def test_non_integer_status_is_none() -> None:
    record = get_parser("jsonlines", "uri=u,duration_ms=d,status=s").parse(
        '{"u": "/", "d": 1, "s": 200.5}'
    )
    assert record is not None
    assert record.status is None


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (None, "needs a field mapping"),
        ("  ", "needs a field mapping"),
        ("uri=u", "no duration"),
        ("duration_ms=d", "no uri or header"),
        ("uri=u,duration_ms=d,latency=l", "unknown field 'latency'"),
        ("uri=u,duration_ms", "not field=path"),
        ("uri=u,duration_ms=d,uri=v", "'uri' twice"),
        ("uri=u,duration_ms=d,duration_s=e", "duration twice"),
    ],
)
def test_bad_mappings_are_refused(mapping: str | None, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        get_parser("jsonlines", mapping)


def test_mapping_parse() -> None:
    assert parse_mapping(" uri = a.b , duration_ms = c ,") == {"uri": "a.b", "duration_ms": "c"}


def test_samples_through_collect_component() -> None:
    path = SAMPLES / "jsonlines.log"
    parser = get_parser("jsonlines", "uri=req.uri,header=req.pp,duration_ms=ms,status=status,ts=ts")
    rows, counts = collect_component("api", path, parser, "r1", None)
    assert counts == FileCounts(
        component="api",
        path=str(path),
        lines=6,
        matched=3,
        other_run=1,
        untagged=1,
        unparseable=1,
        unparseable_lines=[5],
    )
    assert [(row.users, row.req_id, row.duration_s, row.status, row.ts) for row in rows] == [
        (2, 1, 0.0123, 200, 1795338900.1),
        (2, 2, 0.05, 200, 1795338900.2),
        (4, 3, 0.001, 500, 1795338900.3),
    ]
