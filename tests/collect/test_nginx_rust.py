"""The Rust nginx parser against the Python one: the same records, values and counts on
lines written by a real nginx, on crafted and damaged lines, and on random mutations."""

import random
import re
from dataclasses import astuple
from pathlib import Path

import pytest

from pinchpoint.collect.logs import fastlogs
from pinchpoint.collect.logs import reader as logs
from pinchpoint.collect.logs.fastlogs import match_file
from pinchpoint.collect.logs.reader import FileCounts, TierRow, match_lines, read_from
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.base import parse_clf_time
from pinchpoint.logformats.nginx import (
    COMBINED_FORMAT,
    NGINX_FORMAT,
    NGINX_GRPC_FORMAT,
    parser_for,
)
from pinchpoint.plan.model import Component, Log

pytestmark = pytest.mark.skipif(not fastlogs.available(), reason="the Rust module is not built")

SAMPLES = Path(__file__).parent / "samples"

# The log_format samples/nginx.log was written with, by nginx 1.22.
REAL_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time" '
    'uht="$upstream_header_time" urt="$upstream_response_time" ua=$upstream_addr '
    'us="$upstream_status" msec=$msec iso=$time_iso8601 uri=$request_uri args=$args '
    'xpp="$http_x_pinchpoint"'
)
FORMATS = {
    "pinchpoint": NGINX_FORMAT,
    "grpc": NGINX_GRPC_FORMAT,
    "real": REAL_FORMAT,
    "combined": COMBINED_FORMAT + ' rt=$request_time urt="$upstream_response_time"',
    "custom": '${remote_addr}|$time_local|"$request"|$status|${request_time}s|'
    '"$upstream_response_time"|"$http_user_agent"|$upstream_addr|$args',
    "iso": '$time_iso8601 $request_uri $status $request_time $upstream_response_time "$http_x_pinchpoint"',
    "unquoted": "$request $status $request_time $http_user_agent $query_string",
    "adjacent": "$status$request_time$upstream_response_time${request_uri}x$msec",
    # Literals that a list could also take: which end each list takes matters.
    "lists": "$upstream_addr, $upstream_status : $request_time $upstream_response_time, $args",
    "header": "$request_uri $request_time $upstream_addr, $http_x_pinchpoint",
    "quoted": '"$request$http_user_agent" $request_time "$args""$http_x_pinchpoint"',
    # Free text, a literal with no space and a word, in one group: the text ends at the
    # first `:` of a run only.
    "text_colon_word": "$http_user_agent:$request_uri $request_time $status",
}

BASE = {
    "remote_addr": "10.0.0.1",
    "remote_user": "-",
    "time_local": "22/Nov/2026:10:15:00 +0100",
    "request": "GET /a?pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1",
    "status": "200",
    "body_bytes_sent": "512",
    "http_referer": "-",
    "http_user_agent": "Mozilla/5.0 (X11; Linux x86_64)",
    "request_time": "0.012",
    "upstream_connect_time": "0.001",
    "upstream_header_time": "0.009",
    "upstream_response_time": "0.010",
    "upstream_addr": "127.0.0.1:8001",
    "upstream_status": "200",
    "msec": "1795338900.123",
    "time_iso8601": "2026-11-22T10:15:00+01:00",
    "request_uri": "/a?pp_run=r1&pp_users=4&pp_req=17",
    "args": "pp_run=r1&pp_users=4&pp_req=17",
    "query_string": "pp_run=r1&pp_users=4&pp_req=17",
    "http_x_pinchpoint": "-",
}


def tagged(query: str) -> dict[str, str]:
    return {
        "request": f"GET /a?{query} HTTP/1.1",
        "request_uri": f"/a?{query}",
        "args": query,
        "query_string": query,
    }


VARIANTS: list[dict[str, str]] = [
    {},
    {"upstream_response_time": "0.010, 0.020"},
    {"upstream_response_time": "0.010 : 0.020"},
    {"upstream_response_time": "0.1, 0.2 : 0.3"},
    {"upstream_response_time": "-, 0.020"},
    {"upstream_response_time": "- : -"},
    {"upstream_response_time": "-"},
    {"upstream_response_time": "0.010,0.020"},
    {"upstream_response_time": "0.010 ,  0.020"},
    {"upstream_response_time": "0.010, "},
    {"upstream_response_time": "1e5"},
    {"request_time": "-"},
    {"request_time": "12"},
    {"request_time": "1."},
    {"request_time": "0.0001"},
    {"request_time": "123456789012345678901234.5"},
    {"status": "-"},
    {"status": "2000"},
    {"msec": "-"},
    {"msec": "-", "time_local": "22/nov/2026:10:15:00 -0030"},
    {"msec": "-", "time_local": "30/Feb/2026:10:15:00 +0100"},
    {"msec": "-", "time_local": "22/Xyz/2026:10:15:00 +0100"},
    {"msec": "-", "time_local": "22/Nov/2026:10:15:00 +2400"},
    {"time_iso8601": "2026-11-22T10:15:00Z"},
    {"time_iso8601": "2026-11-22T10:15:00"},
    {"time_iso8601": "2026-11-22T24:00:00"},
    {"time_iso8601": "2026-11-22T10:15:00+05:99"},
    {"time_iso8601": "2026-02-30T10:15:00+01:00"},
    tagged("pp_run=r0&pp_users=4&pp_req=17"),
    tagged("pp_run=r10&pp_users=4&pp_req=17"),
    tagged("x=1&pp_run=r1&pp_rate=7.5&pp_req=3"),
    tagged("pp_run=r1&pp_rate=7.1234567"),
    tagged("pp_run=r1&pp_users=bad&pp_req=3"),
    tagged("pp_run=r1&pp_users=8"),
    tagged("pp_run=r1&pp_users=4294967296&pp_req=1"),
    tagged("pp_run=r1&pp_users=1&pp_req=18446744073709551615"),
    tagged("pp_run=r1&pp_users=1&pp_req=18446744073709551616"),
    tagged("pp_run=r1?pp_users=3"),
    tagged("pp_run=r1&pp_users=2&pp_run=r0"),
    tagged("pp_run=r1;pp_users=2;pp_req=5#frag"),
    tagged("xpp_run=r1&pp_users=2"),
    tagged("q=%22a%22"),
    {**tagged("x=1"), "http_x_pinchpoint": "run=r1; users=3; req=7"},
    {**tagged("x=1"), "http_x_pinchpoint": " RUN = r1 ;Users=3"},
    {**tagged("x=1"), "http_x_pinchpoint": "run=r0; users=3; req=7"},
    {**tagged("x=1"), "http_x_pinchpoint": "run=r1; rate=0.5"},
    {"request": "GET /a?x=\\x22y\\x22&pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1"},
    {"request": 'GET /a?x=\\"y\\"&pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1'},
    {"request": 'GET /a?x="y"&pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1'},
    {"request": "GET /a?pp_run=r1&pp_users=4&pp_req=17 HTTP/1.1\\"},
    {"http_user_agent": 'agent \\x22with quotes\\x22 \\x5C and spaces "'},
    {"http_user_agent": "agent\twith\x1ccontrol"},
    {"http_user_agent": "agent with é and ü"},
    {"http_referer": "http://x/€ a b"},
    {"upstream_addr": "127.0.0.1:8001, 127.0.0.1:8002 : unix:/tmp/app.sock"},
    {"upstream_addr": "-"},
    {"upstream_addr": "a,  b"},
    {**tagged("x=1"), "upstream_addr": "a, b", "http_x_pinchpoint": "run=r1; users=3"},
    {"remote_addr": ""},
    {"remote_addr": "10.0.0.1 x"},
]

GARBAGE = ["", "   ", "\x1c\t ", "garbage", '{"uri": "/x"}', "\r", "-", "\\", '"', "é", "0.1 200"]


def render(log_format: str, values: dict[str, str]) -> str:
    return re.sub(
        r"\$\{([A-Za-z0-9_]+)\}|\$([A-Za-z0-9_]+)",
        lambda m: values.get(m.group(1) or m.group(2), "-"),
        log_format,
    )


def crafted_lines(log_format: str) -> list[str]:
    lines = [render(log_format, {**BASE, **variant}) for variant in VARIANTS]
    whole = lines[0]
    lines += [whole[:cut] for cut in range(len(whole))]  # every partial line
    return lines + GARBAGE


def write(path: Path, lines: list[str], ending: str = "\n") -> Path:
    path.write_bytes("".join(line + ending for line in lines).encode("utf-8"))
    return path


def both(
    log_format: str, path: Path, run_id: str = "r1", offset: int = 0, batch_lines: int = 7
) -> tuple[list[TierRow], FileCounts]:
    """Both parsers on one file: asserts identical rows (value and type) and counts."""
    parser = parser_for(log_format)
    expected_counts = FileCounts("nginx", str(path))
    expected = list(match_lines("nginx", read_from(path, offset), parser, run_id, expected_counts))
    counts = FileCounts("nginx", str(path))
    rows = match_file("nginx", path, offset, parser, run_id, counts, batch_lines=batch_lines)
    assert rows is not None
    got = list(rows)
    assert counts == expected_counts
    assert got == expected
    assert [tuple(map(type, astuple(r))) for r in got] == [
        tuple(map(type, astuple(r))) for r in expected
    ]
    return got, counts


def test_real_nginx_lines(tmp_path: Path) -> None:
    rows, counts = both(REAL_FORMAT, SAMPLES / "nginx.log")
    assert (counts.lines, counts.matched, counts.other_run, counts.untagged) == (20, 14, 2, 4)
    assert counts.unparseable == 0
    assert [(r.users, r.req_id, r.status) for r in rows][:4] == [
        (2, 1, 200),
        (2, 2, 200),
        (4, 3, 502),
        (4, 4, 200),
    ]
    assert [r.upstream_s for r in rows[:3]] == [None, 0.0, 0.0]  # "-", "0.000", "0.000, 0.000"
    assert rows[9] == TierRow("nginx", 3, 10, 1795433832.274, 0.0, None, 200)  # header tag
    assert rows[10].users == 0 and rows[10].req_id == 11  # open-loop rate tag
    for run_id in ("r0", "r2", "other"):
        both(REAL_FORMAT, SAMPLES / "nginx.log", run_id=run_id)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_crafted_lines(tmp_path: Path, name: str) -> None:
    log = write(tmp_path / "access.log", crafted_lines(FORMATS[name]))
    _, counts = both(FORMATS[name], log)
    assert counts.lines > 100 and counts.matched > 10 and counts.unparseable > 10
    both(FORMATS[name], write(tmp_path / "crlf.log", crafted_lines(FORMATS[name]), "\r\n"))


def test_crafted_values_in_the_pinchpoint_format(tmp_path: Path) -> None:
    lines = [render(NGINX_FORMAT, {**BASE, **v}) for v in VARIANTS[:6]]
    rows, counts = both(NGINX_FORMAT, write(tmp_path / "access.log", lines))
    assert counts == FileCounts("nginx", str(tmp_path / "access.log"), lines=6, matched=6)
    assert [r.upstream_s for r in rows] == [0.010, 0.030, 0.030, 0.1 + 0.2 + 0.3, 0.020, None]
    assert rows[0] == TierRow("nginx", 4, 17, 1795338900.123, 0.012, 0.010, 200)


def test_grpc_calls_are_matched_by_their_logged_metadata(tmp_path: Path) -> None:
    """A gRPC call's path takes no query: its tag is the `X-Pinchpoint` metadata nginx
    logs (`$http_x_pinchpoint`), read alike by both parsers; a request line's tag first."""
    echo = {"request": "POST /test.Shop/Echo HTTP/2.0", "request_uri": "/test.Shop/Echo"}
    lines = [
        render(NGINX_GRPC_FORMAT, {**BASE, **echo, "http_x_pinchpoint": tag})
        for tag in (
            "run=r1; users=4; req=17",
            "run=r1; rate=7.5; req=3",
            "run=r2; users=4; req=18",
            "-",
            "run=r1; users=x",
        )
    ]
    lines.append(render(NGINX_GRPC_FORMAT, {**BASE, "http_x_pinchpoint": "run=r1; users=9"}))
    rows, counts = both(NGINX_GRPC_FORMAT, write(tmp_path / "access.log", lines))
    assert (counts.matched, counts.other_run, counts.untagged, counts.unparseable) == (3, 1, 2, 0)
    assert [(r.users, r.req_id) for r in rows] == [(4, 17), (0, 3), (4, 17)]
    assert rows[0] == TierRow("nginx", 4, 17, 1795338900.123, 0.012, 0.010, 200)


def test_a_local_time_offset_of_a_day_is_no_time_and_no_error(tmp_path: Path) -> None:
    assert parse_clf_time("22/Nov/2026:10:15:00 +2400") is None
    assert parse_clf_time("22/Nov/2026:10:15:00 -2359") == 1795338900.0 + 86340 + 3600
    line = render(NGINX_FORMAT, {**BASE, "msec": "-", "time_local": "22/Nov/2026:10:15:00 +9900"})
    rows, _ = both(NGINX_FORMAT, write(tmp_path / "access.log", [line]))
    assert [(r.req_id, r.ts) for r in rows] == [(17, None)]


def test_lines_with_other_bytes_are_parsed_by_python_in_place(tmp_path: Path) -> None:
    good = render(NGINX_FORMAT, BASE).encode()
    other = render(NGINX_FORMAT, {**BASE, **tagged("pp_run=r1&pp_users=9&pp_req=1")})
    log = tmp_path / "access.log"
    data = [good, other.replace("GET", "G\xe9T").encode(), b"\xff" + good, good[:-3] + b"\xff"]
    log.write_bytes(b"\n".join(data) + b"\n\xc2\xa0\n" + good)
    rows, counts = both(NGINX_FORMAT, log, batch_lines=2)
    # A replaced byte before the address is part of it; one in $msec is not a number.
    # The no-break space line is blank.
    assert (counts.lines, counts.matched, counts.unparseable) == (5, 4, 1)
    assert counts.unparseable_lines == [4]
    assert [r.users for r in rows] == [4, 9, 4, 4]


def test_a_line_with_too_many_upstream_tries_to_follow_is_parsed_by_python(
    tmp_path: Path,
) -> None:
    log_format = "$request_time $upstream_response_time $args"
    long = "0.5 " + "0.1, " * 1000 + "0.1 pp_run=r1&pp_users=2"
    lines = [long, "0.5 0.1, 0.2 pp_run=r1&pp_users=3", long + " x"]
    log = write(tmp_path / "access.log", lines)
    rows, counts = both(log_format, log)
    assert [(r.users, r.duration_s) for r in rows] == [(2, 0.5), (3, 0.5)]
    assert rows[0].upstream_s == pytest.approx(100.1)
    assert (counts.lines, counts.unparseable, counts.unparseable_lines) == (3, 1, [3])
    scanner = fastlogs.NginxScanner(str(log), 0, log_format, "r1", 1 << 20, False)
    assert scanner.next_batch(100)["deferred"] == long.encode()


def test_lines_that_once_backtracked_are_decided_by_rust(tmp_path: Path) -> None:
    log_format = "$http_a $http_b $http_c $http_d $request_time $args"
    hard = "x " * 30_000 + "y"  # no match: each text variable ends at its first space
    lines = [hard, "a b c d 0.5 pp_run=r1&pp_users=2", hard]
    log = write(tmp_path / "access.log", lines)
    rows, counts = both(log_format, log)
    assert [(r.users, r.duration_s) for r in rows] == [(2, 0.5)]
    assert (counts.lines, counts.unparseable, counts.unparseable_lines) == (3, 2, [1, 3])
    scanner = fastlogs.NginxScanner(str(log), 0, log_format, "r1", 1 << 20, False)
    batch = scanner.next_batch(100)
    assert (batch["deferred"], batch["lines"], batch["unparseable"]) == (None, 3, 2)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_random_mutations(tmp_path: Path, name: str) -> None:
    rng = random.Random(f"nginx-{name}")
    alphabet = '0123456789.-, :"\\\t\r\x0b\x00\x1c&?=;#_pr_un/[]|xéZT+'
    lines = []
    for _ in range(1500):
        line = list(render(FORMATS[name], {**BASE, **rng.choice(VARIANTS), **rng.choice(VARIANTS)}))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(line) + 1)
            edit = rng.random()
            if edit < 0.4 and at < len(line):
                del line[at]
            elif edit < 0.7:
                line.insert(at, rng.choice(alphabet))
            elif at < len(line):
                line[at] = rng.choice(alphabet)
        lines.append("".join(line))
    _, counts = both(FORMATS[name], write(tmp_path / "access.log", lines), batch_lines=100)
    assert counts.matched > 100 and counts.unparseable > 100


def test_long_lines_are_cut_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line = render(NGINX_FORMAT, BASE)
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", len(line) - 2)
    lines = [line, line + "xyz", line[:-1], "x" * 5000, line]
    rows, counts = both(NGINX_FORMAT, write(tmp_path / "access.log", lines))
    # Cut to its last two digits, the first line still parses, with another msec.
    assert [r.ts for r in rows] == [1795338900.1, 1795338900.1, 1795338900.1, 1795338900.1]
    assert (counts.lines, counts.unparseable) == (5, 1)


def test_every_offset(tmp_path: Path) -> None:
    lines = [render(NGINX_FORMAT, {**BASE, **v}) for v in VARIANTS[:4]]
    log = write(tmp_path / "access.log", lines)
    for offset in [*range(len(lines[0]) + 3), log.stat().st_size - 1, log.stat().st_size + 10]:
        both(NGINX_FORMAT, log, offset=offset)
    assert both(NGINX_FORMAT, log, offset=len(lines[0]) + 1)[1].lines == 3
    assert both(NGINX_FORMAT, log, offset=log.stat().st_size + 10)[1].lines == 4


def test_missing_file_and_other_formats(tmp_path: Path) -> None:
    counts = FileCounts("nginx", "x")
    rows = match_file("nginx", tmp_path / "missing.log", 0, parser_for(None), "r1", counts)
    assert rows is not None and list(rows) == []
    assert counts == FileCounts("nginx", "x")
    gunicorn = get_parser("gunicorn")
    assert match_file("app", tmp_path / "x.log", 0, gunicorn, "r1", counts) is None


def test_the_local_collector_reads_nginx_logs_with_the_rust_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[object, ...]] = []
    real = fastlogs.NginxScanner

    def spy(*args: object) -> object:
        opened.append(args)
        return real(*args)

    monkeypatch.setattr(fastlogs, "NginxScanner", spy)
    log = write(tmp_path / "access.log", [render(NGINX_FORMAT, BASE)])
    collector = LocalCollector([Component(name="nginx", log=Log(path=str(log), format="nginx"))])
    collector.start("r1", interval_s=10.0)
    with open(log, "a") as file:
        file.write(render(NGINX_FORMAT, {**BASE, **tagged("pp_run=r1&pp_users=6&pp_req=2")}))
        file.write("\n" + render(NGINX_FORMAT, {**BASE, **tagged("x=1")}) + "\n")
    collector.stop()
    counts: list[FileCounts] = []
    ticks: list[int] = []
    rows = list(collector.component_rows("nginx", counts, tick=lambda: ticks.append(1)))
    assert [(r.users, r.req_id) for r in rows] == [(6, 2)]
    assert [(c.lines, c.matched, c.untagged) for c in counts] == [(2, 1, 1)]
    assert len(opened) == 1 and opened[0][2] == NGINX_FORMAT


def test_free_text_then_a_word_gives_the_same_records_on_runs_full_of_the_literal(
    tmp_path: Path,
) -> None:
    log_format = FORMATS["text_colon_word"]
    uri = "/a?pp_run=r1&pp_users=4&pp_req=17"
    lines = [
        f"agent x:y:{uri} 0.012 200",  # the text holds a space, the word a `:`
        f"a:b c:{uri} 0.5 404",  # the first run's `:` fails, the second run's matches
        "x:" * 3000 + f"{uri} 0.5 200",  # one run of 6,000 bytes full of `:`
        "x:" * 3000 + f"{uri} 0.5 200 x",  # the same, broken after it
        f"no colon {uri} 0.5 200",
    ]
    rows, counts = both(log_format, write(tmp_path / "access.log", lines))
    assert counts.matched == 3 and counts.lines == 5
    assert {row.status for row in rows} == {200, 404}


@pytest.mark.parametrize("table_lines", [65536, 5])
def test_the_collector_writes_the_rust_parser_s_tables_as_the_python_rows_would_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_lines: int
) -> None:
    import pyarrow.parquet as pq

    from pinchpoint.collect.gather import TierWriter

    monkeypatch.setattr(fastlogs, "TABLE_LINES", table_lines)
    good = render(NGINX_FORMAT, BASE)
    other = render(NGINX_FORMAT, {**BASE, **tagged("pp_run=r1&pp_users=9&pp_req=1")})
    lines = [*crafted_lines(NGINX_FORMAT), other.replace("GET", "G\xe9T"), good, other]
    log = write(tmp_path / "access.log", lines * 3)
    offsets = {4: 1000, 9: 5}
    expected = FileCounts("nginx", str(log))
    with TierWriter(tmp_path / "python.parquet", req_id_offsets=offsets) as reference:
        parser = parser_for(NGINX_FORMAT)
        reference.add(list(match_lines("nginx", read_from(log, 0), parser, "r1", expected)))
    collector = LocalCollector([Component(name="nginx", log=Log(path=str(log), format="nginx"))])
    collector.read_whole_logs("r1")
    batches: list[object] = []
    with TierWriter(tmp_path / "rust.parquet", group_rows=8, req_id_offsets=offsets) as writer:
        counts = collector.collect_logs(lambda b: (batches.append(type(b).__name__), writer.add(b)))
    python, rust = (
        pq.read_table(tmp_path / "python.parquet"),
        pq.read_table(tmp_path / "rust.parquet"),
    )
    assert rust.num_rows == python.num_rows > 30
    assert rust.equals(python)
    # The Rust parser's records came as record batches, the non-ASCII line it handed back
    # as a row; batches are written together in row groups of at least `group_rows`.
    assert {"RecordBatch", "list"} <= set(batches)
    groups = pq.ParquetFile(tmp_path / "rust.parquet").metadata.num_row_groups
    assert groups < batches.count("RecordBatch") if table_lines == 5 else groups <= 7
    assert counts == [expected] and expected.matched == python.num_rows


def test_next_tiers_hands_over_the_columns_next_batch_gives(tmp_path: Path) -> None:
    import pyarrow as pa

    from pinchpoint.rundir.schemas import TIERS_SCHEMA

    lines = [render(NGINX_FORMAT, {**BASE, **variant}) for variant in VARIANTS]
    log = write(tmp_path / "access.log", [*lines, "garbage"])
    scan = fastlogs.NginxScanner(str(log), 0, NGINX_FORMAT, "r1", 1 << 20, False)
    columns = scan.next_batch(1000)
    scan = fastlogs.NginxScanner(str(log), 0, NGINX_FORMAT, "r1", 1 << 20, False)
    tiers = scan.next_tiers(1000, "edge")
    assert {k: v for k, v in tiers.items() if k != "tiers"} == {
        k: v for k, v in columns.items() if k in tiers
    }
    assert tiers["deferred"] is None and tiers["unparseable"] > 1
    assert tiers["rows"] == len(tiers["tiers"]) > 3
    batch = pa.record_batch(tiers["tiers"])
    assert batch.schema.equals(TIERS_SCHEMA)
    assert batch.column("component").to_pylist() == ["edge"] * tiers["rows"]
    expected = list(fastlogs.batch_rows("edge", columns))
    assert batch.to_pylist() == [
        {**dict(zip(TIERS_SCHEMA.names, astuple(row), strict=True))} for row in expected
    ]
    # Nothing left: no batch, and the counts of nothing.
    assert scan.next_tiers(1000, "edge")["tiers"] is None
