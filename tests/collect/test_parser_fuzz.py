"""Property-based fuzzing of every log format: arbitrary text, and valid lines with edits
(text cut out or put in, numbers made huge, infinite or negative, fields padded). A parser
gives a record whose values are in range, NOT_A_RECORD, or None (a counted rejection),
never an exception; every line is counted once and the matched rows fit tiers.parquet;
valid lines still give their values.

The budget is Hypothesis's profile (tests/conftest.py): short in `make test`, long with
HYPOTHESIS_PROFILE=long.
"""

from __future__ import annotations

import io
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collect.format_cases import AGENT_CHARS, CASE_IDS, CASES, RUN_ID, URI_CHARS, FormatCase
from collect.format_cases import tagged_uri as tagged
from pinchpoint.collect.logs.reader import FileCounts, match_lines, write_tiers
from pinchpoint.logformats import NOT_A_RECORD, LineParser, Record, get_parser
from pinchpoint.logformats.base import MAX_DURATION_S, MAX_LINE_CHARS
from pinchpoint.logformats.tag import find_tag, parse_header

# Texts a hostile number can be written as.
HOSTILE_NUMBERS = [
    "9" * 5000,
    "1" + "0" * 400,
    "1e400",
    "-1e400",
    "inf",
    "-inf",
    "nan",
    "NaN",
    "-1",
    str(2**64),
    str(2**63),
    "1e-400",
    "0." + "0" * 400 + "1",
    "0x10",
    "١٢٣",  # Arabic-Indic digits, which Python's int() and float() read
]
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parser_of(case: FormatCase) -> LineParser:
    return get_parser(case.format_name, case.log_format)


def assert_sane(record: Record | None) -> None:
    """A parser's result: None, NOT_A_RECORD, or a record whose values are in range."""
    if record is None or record is NOT_A_RECORD:
        return
    assert isinstance(record, Record)
    for seconds in (record.duration_s, record.upstream_s, getattr(record, "queue_s", None)):
        assert seconds is None or 0.0 <= seconds <= MAX_DURATION_S
    assert record.status is None or 100 <= record.status <= 999
    assert record.ts is None or math.isfinite(record.ts)
    assert isinstance(record.target, str)
    assert record.tag_header is None or isinstance(record.tag_header, str)


def assert_counted(case: FormatCase, lines: list[str]) -> None:
    """The collector counts every non-blank line once and its rows fit tiers.parquet."""
    counts = FileCounts(component="c", path="p")
    rows = list(match_lines("c", lines, parser_of(case), RUN_ID, counts))
    assert counts.lines == sum(1 for line in lines if line.strip())
    assert counts.lines == counts.matched + counts.other_run + counts.untagged + counts.unparseable
    assert len(rows) == counts.matched
    write_tiers(rows, io.BytesIO())  # raises if a value does not fit its column


def valid_line(case: FormatCase, data: st.DataObject) -> str:
    path = data.draw(st.text(URI_CHARS, max_size=40), label="path")
    agent = data.draw(st.text(AGENT_CHARS, min_size=1, max_size=40).map(str.strip), label="agent")
    return case.line(tagged(path, 4, 17), agent or "a", 12, 200)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@given(text=st.text(max_size=300))
def test_arbitrary_text_is_rejected_or_sane(case: FormatCase, text: str) -> None:
    assert_sane(parser_of(case).parse(text))
    assert_counted(case, text.splitlines())


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@given(data=st.data())
def test_valid_lines_with_text_cut_out_or_put_in_are_rejected_or_sane(
    case: FormatCase, data: st.DataObject
) -> None:
    line = valid_line(case, data)
    start = data.draw(st.integers(0, len(line)), label="start")
    stop = data.draw(st.integers(start, min(len(line), start + 40)), label="stop")
    insert = data.draw(st.text(max_size=30) | st.sampled_from(HOSTILE_NUMBERS), label="insert")
    edited = line[:start] + insert + line[stop:]
    assert_sane(parser_of(case).parse(edited))
    assert_counted(case, [line, edited, line])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@given(data=st.data())
def test_a_number_of_a_valid_line_made_hostile_is_rejected_or_sane(
    case: FormatCase, data: st.DataObject
) -> None:
    line = valid_line(case, data)
    numbers = list(_NUMBER.finditer(line))
    at = data.draw(st.sampled_from(numbers), label="number")
    hostile = data.draw(st.sampled_from(HOSTILE_NUMBERS), label="hostile")
    edited = line[: at.start()] + hostile + line[at.end() :]
    assert_sane(parser_of(case).parse(edited))
    assert_counted(case, [edited])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@given(data=st.data())
def test_a_valid_line_padded_by_repeating_a_part_is_rejected_or_sane(
    case: FormatCase, data: st.DataObject
) -> None:
    line = valid_line(case, data)
    start = data.draw(st.integers(0, len(line) - 1), label="start")
    stop = data.draw(st.integers(start + 1, min(len(line), start + 8)), label="stop")
    times = data.draw(st.integers(1, MAX_LINE_CHARS // (stop - start) + 2), label="times")
    edited = line[:start] + line[start:stop] * times + line[stop:]
    record = parser_of(case).parse(edited)
    assert_sane(record)
    if len(edited) > MAX_LINE_CHARS:
        assert record is None


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@given(
    path=st.text(URI_CHARS, max_size=60),
    agent=st.text(AGENT_CHARS, min_size=1, max_size=60).map(str.strip).filter(bool),
    millis=st.integers(0, int(MAX_DURATION_S * 1000)),
    status=st.integers(100, 999),
    users=st.integers(0, 2**32 - 1),
    req=st.integers(0, 2**64 - 1),
)
def test_valid_lines_give_their_values(
    case: FormatCase, path: str, agent: str, millis: int, status: int, users: int, req: int
) -> None:
    record = parser_of(case).parse(case.line(tagged(path, users, req), agent, millis, status))
    assert record is not None
    assert record is not NOT_A_RECORD
    assert record.duration_s == pytest.approx(millis / 1000, rel=1e-12, abs=1e-12)
    assert record.status == (status if case.has_status else None)
    tag = find_tag(record.target) or (parse_header(record.tag_header or "") if record else None)
    assert tag is not None
    assert (tag.run_id, tag.users, tag.req_id) == (RUN_ID, users, req)
