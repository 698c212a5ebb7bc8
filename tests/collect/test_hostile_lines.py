"""Lines a client can make a server write, through the collector of every format: a tag
of thousands of digits, durations of 10^400, infinite or not a number, statuses of 2^64
or -1, lines of 1 MB and JSON nested thousands deep. Each is counted (untagged or
unparseable), the others are matched, and tiers.parquet and collection.json are written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from collect.format_cases import CASE_IDS, CASES, HUGE_DIGITS, RUN_ID, FormatCase, tagged_uri
from pinchpoint.collect.logs.reader import (
    FileCounts,
    collect_component,
    collection_json,
    write_tiers,
)
from pinchpoint.logformats import get_parser
from pinchpoint.logformats.base import MAX_LINE_CHARS

AGENT = "Mozilla/5.0 (X11; Linux x86_64)"
HOSTILE_DURATIONS = ["1" + "0" * 400, "9" * HUGE_DIGITS, "1e400", "inf", "nan", "-1"]
# Formats whose own mark for "no response" is a status of -1.
MINUS_ONE_IS_NO_STATUS = {"haproxy", "uwsgi", "uwsgi-logformat"}


def collect(case: FormatCase, tmp_path: Path, lines: list[str]) -> FileCounts:
    """Counts of collecting `lines` as run RUN_ID; tiers.parquet and collection.json are
    written from what was matched."""
    log = tmp_path / "access.log"
    log.write_text("".join(line + "\n" for line in lines))
    parser = get_parser(case.format_name, case.log_format)
    rows, counts = collect_component("tier", log, parser, RUN_ID, None)
    write_tiers(rows, tmp_path / "tiers.parquet")
    assert pq.read_table(tmp_path / "tiers.parquet").num_rows == counts.matched
    json.dumps(collection_json(RUN_ID, [counts]))
    return counts


def good(case: FormatCase, req: int) -> str:
    return case.line(tagged_uri("ok", 4, req), AGENT, 12, 200)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_tags_of_thousands_of_digits_are_untagged(case: FormatCase, tmp_path: Path) -> None:
    huge = "9" * HUGE_DIGITS
    lines = [
        good(case, 1),
        case.line(f"/a?pp_run={RUN_ID}&pp_users={huge}&pp_req=2", AGENT, 12, 200),
        case.line(f"/a?pp_run={RUN_ID}&pp_users=4&pp_req={huge}", AGENT, 12, 200),
        case.line(f"/a?pp_run={RUN_ID}&pp_users=4&pp_req={'0' * HUGE_DIGITS}5", AGENT, 12, 200),
    ]
    counts = collect(case, tmp_path, lines)
    # Leading zeros do not make a number large: the last line is request 5.
    assert (counts.lines, counts.matched, counts.untagged, counts.unparseable) == (4, 2, 2, 0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_durations_that_are_not_times_are_unparseable(case: FormatCase, tmp_path: Path) -> None:
    uri = tagged_uri("a", 4, 7)
    hostile = [case.build(uri, AGENT, value, "200") for value in HOSTILE_DURATIONS]
    counts = collect(case, tmp_path, [good(case, 1), *hostile, good(case, 2)])
    assert (counts.matched, counts.unparseable) == (2, len(HOSTILE_DURATIONS))
    assert counts.unparseable_lines == [2, 3, 4, 5, 6]


@pytest.mark.parametrize("case", [c for c in CASES if c.has_status], ids=lambda c: c.name)
def test_statuses_outside_100_to_999_are_unparseable(case: FormatCase, tmp_path: Path) -> None:
    uri = tagged_uri("a", 4, 7)
    lines = [case.build(uri, AGENT, "12", status) for status in (str(2**64), "1000", "-1")]
    counts = collect(case, tmp_path, [good(case, 1), *lines])
    if case.name in MINUS_ONE_IS_NO_STATUS:
        assert (counts.matched, counts.unparseable) == (2, 2)
    else:
        assert (counts.matched, counts.unparseable) == (1, 3)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_a_line_is_parsed_up_to_the_cap_and_not_past_it(case: FormatCase, tmp_path: Path) -> None:
    base = len(case.line(tagged_uri("", 4, 1), AGENT, 12, 200))
    at_cap = case.line(tagged_uri("a" * (MAX_LINE_CHARS - base), 4, 1), AGENT, 12, 200)
    over = case.line(tagged_uri("a" * (MAX_LINE_CHARS - base + 1), 4, 2), AGENT, 12, 200)
    assert (len(at_cap), len(over)) == (MAX_LINE_CHARS, MAX_LINE_CHARS + 1)
    counts = collect(case, tmp_path, [at_cap, over])
    assert (counts.matched, counts.unparseable, counts.unparseable_lines) == (1, 1, [2])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_lines_of_a_megabyte_are_unparseable_and_the_rest_is_read(
    case: FormatCase, tmp_path: Path
) -> None:
    padded_uri = case.line(tagged_uri("a" * 2**20, 4, 2), AGENT, 12, 200)
    lines = [good(case, 1), padded_uri, "{" * 2**20, good(case, 4)]
    if "x x x" in case.line(tagged_uri("", 4, 1), "x x x", 12, 200):  # it logs the agent
        lines.insert(2, case.line(tagged_uri("b", 4, 3), "x " * 2**19, 12, 200))
    counts = collect(case, tmp_path, lines)
    assert (counts.lines, counts.matched, counts.unparseable) == (len(lines), 2, len(lines) - 2)


@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c.name in ("jsonlines", "probe", "postgresql-jsonlog")],
    ids=lambda c: c.name,
)
def test_json_nested_thousands_deep_is_unparseable(case: FormatCase, tmp_path: Path) -> None:
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    counts = collect(case, tmp_path, [good(case, 1), deep, "[" * 60000])
    assert (counts.matched, counts.unparseable) == (1, 2)


def test_a_csvlog_record_whose_lines_pass_the_cap_together_is_unparseable(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "postgresql-csvlog")
    first, rest = good(case, 1).split("statement: ", 1)
    spread = first + "statement: " + "x\n" * (MAX_LINE_CHARS // 2) + rest
    counts = collect(case, tmp_path, [good(case, 1), *spread.split("\n"), good(case, 2)])
    assert counts.matched == 2
    assert counts.unparseable == counts.lines - counts.matched - counts.untagged
    assert counts.unparseable >= 1
