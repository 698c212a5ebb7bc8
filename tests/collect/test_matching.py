from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pinchpoint.collect.logs.reader import (
    FileCounts,
    TierRow,
    collect_component,
    collection_json,
    mark,
    write_tiers,
)
from pinchpoint.logformats import get_parser
from pinchpoint.rundir.schemas import TIERS_SCHEMA


def nginx_line(uri: str, status: int = 200, rt: str = "0.010", urt: str = "-") -> str:
    return (
        f'127.0.0.1 [22/Nov/2026:10:15:00 +0100] "GET {uri} HTTP/1.1" {status} 2 '
        f"rt={rt} urt={urt} uct=- uht=- msec=1795338900.500\n"
    )


def write_mixed_log(path: Path) -> None:
    lines = [
        nginx_line("/a?pp_run=r1&pp_users=2&pp_req=1", urt="0.008"),
        nginx_line("/a?pp_run=r0&pp_users=2&pp_req=1"),  # another run
        nginx_line("/a"),  # untagged
        nginx_line("/a?pp_run=r1&pp_users=4&pp_req=2", status=502, rt="0.500", urt="0.2, 0.3"),
        "garbage that is no log line\n",
        "\n",  # blank: not a line
        nginx_line("/a?pp_run=r10&pp_users=4&pp_req=3"),  # run id sharing a prefix
        nginx_line("/a?pp_run=r1&pp_users=bad&pp_req=3"),  # damaged tag: untagged
        nginx_line("/a?pp_run=r1&pp_users=8"),  # no request id
        '127.0.0.1 [22/Nov/2026:10:15:00 +0100] "GET /a?pp_run=r1&pp_users=2&pp_req=9 HTTP/1.1"'
        " 200 2 rt=0.0\xff1\n",  # cut short, with a byte that is not UTF-8
    ]
    with open(path, "wb") as file:
        for line in lines:
            file.write(line.encode("latin-1"))


def test_mixed_log_keeps_only_this_runs_records_and_counts_the_rest(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    write_mixed_log(log)

    rows, counts = collect_component("nginx", log, get_parser("nginx"), "r1", None)

    assert counts == FileCounts(
        component="nginx",
        path=str(log),
        lines=9,
        matched=3,
        other_run=2,
        untagged=2,
        unparseable=2,
        unparseable_lines=[5, 9],
    )
    assert [(row.users, row.req_id, row.status) for row in rows] == [
        (2, 1, 200),
        (4, 2, 502),
        (8, None, 200),
    ]
    assert rows[0] == TierRow(
        component="nginx",
        users=2,
        req_id=1,
        ts=1795338900.5,
        duration_s=0.010,
        upstream_s=0.008,
        status=200,
    )
    assert rows[1].duration_s == 0.5
    assert rows[1].upstream_s == pytest.approx(0.5)
    assert rows[2].upstream_s is None


def test_only_lines_after_the_mark_are_read(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_text(nginx_line("/a?pp_run=r1&pp_users=2&pp_req=1"))
    position = mark(log)
    with open(log, "a") as file:
        file.write(nginx_line("/a?pp_run=r1&pp_users=2&pp_req=2"))

    rows, counts = collect_component("nginx", log, get_parser("nginx"), "r1", position)

    assert (counts.lines, counts.matched) == (1, 1)
    assert [row.req_id for row in rows] == [2]


def test_tag_in_logged_header_matches_when_uri_has_none(tmp_path: Path) -> None:
    log = tmp_path / "gunicorn.log"
    log.write_text(
        '"GET /a HTTP/1.1" 200 1500 "run=r1; users=3; req=7"\n'
        '"GET /a HTTP/1.1" 200 1500 "run=r2; users=3; req=7"\n'
        '"GET /a HTTP/1.1" 200 1500 "-"\n'
    )
    parser = get_parser("gunicorn", '"%(r)s" %(s)s %(D)s "%({x-pinchpoint}i)s"')

    rows, counts = collect_component("gunicorn", log, parser, "r1", None)

    assert (counts.lines, counts.matched, counts.other_run, counts.untagged) == (3, 1, 1, 1)
    assert rows == [TierRow("gunicorn", 3, 7, None, 0.0015, None, 200)]


def test_missing_log_gives_zero_counts(tmp_path: Path) -> None:
    log = tmp_path / "missing.log"
    rows, counts = collect_component("app", log, get_parser("probe"), "r1", mark(log))
    assert rows == []
    assert counts == FileCounts(component="app", path=str(log))


def test_invalid_run_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid run id"):
        collect_component("app", tmp_path / "x.log", get_parser("probe"), "r 1", None)


def test_many_unparseable_lines_keep_five_examples(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("junk\n" * 12)
    _, counts = collect_component("app", log, get_parser("probe"), "r1", None)
    assert (counts.lines, counts.unparseable) == (12, 12)
    assert counts.unparseable_lines == [1, 2, 3, 4, 5]


def test_tiers_parquet_has_the_documented_schema(tmp_path: Path) -> None:
    rows = [
        TierRow("nginx", 2, 1, 1795338900.5, 0.010, 0.008, 200),
        TierRow("app", 4, None, None, 0.5, None, None),
    ]
    path = tmp_path / "tiers.parquet"
    write_tiers(rows, path)

    table = pq.read_table(path)
    assert table.schema.equals(TIERS_SCHEMA)
    assert [(f.name, f.type, f.nullable) for f in table.schema] == [
        ("component", pa.string(), False),
        ("users", pa.uint32(), False),
        ("req_id", pa.uint64(), True),
        ("ts", pa.float64(), True),
        ("duration_s", pa.float64(), False),
        ("upstream_s", pa.float64(), True),
        ("status", pa.int32(), True),
        ("queue_s", pa.float64(), True),
        ("span_kind", pa.string(), True),
        ("parent", pa.string(), True),
    ]
    assert table.to_pylist() == [
        {
            "component": "nginx",
            "users": 2,
            "req_id": 1,
            "ts": 1795338900.5,
            "duration_s": 0.010,
            "upstream_s": 0.008,
            "status": 200,
            "queue_s": None,
            "span_kind": None,
            "parent": None,
        },
        {
            "component": "app",
            "users": 4,
            "req_id": None,
            "ts": None,
            "duration_s": 0.5,
            "upstream_s": None,
            "status": None,
            "queue_s": None,
            "span_kind": None,
            "parent": None,
        },
    ]


def test_no_rows_write_an_empty_tiers_parquet(tmp_path: Path) -> None:
    path = tmp_path / "tiers.parquet"
    write_tiers([], path)
    table = pq.read_table(path)
    assert table.num_rows == 0
    assert table.schema.equals(TIERS_SCHEMA)


def test_collection_json_sums_files_per_component() -> None:
    counts = [
        FileCounts("nginx", "/a.log", lines=5, matched=3, other_run=1, untagged=1),
        FileCounts("nginx", "/b.log", lines=2, matched=1, unparseable=1, unparseable_lines=[2]),
        FileCounts("app", "/app.log"),
    ]
    assert collection_json("r1", counts) == {
        "schema": "pinchpoint.collection/1",
        "run_id": "r1",
        "components": {
            "nginx": {
                "lines": 7,
                "matched": 4,
                "other_run": 1,
                "untagged": 1,
                "unparseable": 1,
                "files": {
                    "/a.log": {
                        "lines": 5,
                        "matched": 3,
                        "other_run": 1,
                        "untagged": 1,
                        "unparseable": 0,
                        "unparseable_lines": [],
                    },
                    "/b.log": {
                        "lines": 2,
                        "matched": 1,
                        "other_run": 0,
                        "untagged": 0,
                        "unparseable": 1,
                        "unparseable_lines": [2],
                    },
                },
            },
            "app": {
                "lines": 0,
                "matched": 0,
                "other_run": 0,
                "untagged": 0,
                "unparseable": 0,
                "files": {
                    "/app.log": {
                        "lines": 0,
                        "matched": 0,
                        "other_run": 0,
                        "untagged": 0,
                        "unparseable": 0,
                        "unparseable_lines": [],
                    }
                },
            },
        },
    }
