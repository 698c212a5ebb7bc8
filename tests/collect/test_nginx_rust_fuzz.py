"""Property-based fuzzing of the Rust nginx parser against the Python one: on valid lines
with edits (text cut out or put in, numbers made hostile, parts repeated past the line
cap), both give the same records and counts."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collect.test_nginx_rust import BASE, FORMATS, VARIANTS, both, render, write
from pinchpoint.collect.logs import fastlogs
from pinchpoint.logformats.base import MAX_LINE_CHARS

pytestmark = pytest.mark.skipif(not fastlogs.available(), reason="the Rust module is not built")

HOSTILE = ["9" * 5000, "1" + "0" * 400, "1e400", "inf", "nan", "-1", str(2**64), "000"]


def a_line(data: st.DataObject) -> tuple[str, str]:
    name = data.draw(st.sampled_from(sorted(FORMATS)), label="format")
    variant = data.draw(st.sampled_from(VARIANTS), label="variant")
    return FORMATS[name], render(FORMATS[name], {**BASE, **variant})


def compare(log_format: str, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        both(log_format, write(Path(folder) / "access.log", lines))


@given(data=st.data())
def test_edited_lines(data: st.DataObject) -> None:
    log_format, line = a_line(data)
    start = data.draw(st.integers(0, len(line)), label="start")
    stop = data.draw(st.integers(start, min(len(line), start + 20)), label="stop")
    insert = data.draw(
        st.text(st.characters(max_codepoint=127), max_size=20) | st.sampled_from(HOSTILE),
        label="insert",
    )
    compare(log_format, [line, line[:start] + insert + line[stop:], line])


@given(data=st.data())
def test_lines_padded_up_to_and_past_the_cap(data: st.DataObject) -> None:
    log_format, line = a_line(data)
    start = data.draw(st.integers(0, len(line) - 1), label="start")
    stop = data.draw(st.integers(start + 1, min(len(line), start + 4)), label="stop")
    part = line[start:stop]
    target = data.draw(st.integers(MAX_LINE_CHARS - 8, MAX_LINE_CHARS + 8), label="length")
    times = max(1, (target - len(line)) // len(part) + 1)
    padded = line[:start] + part * times + line[stop:]
    compare(log_format, [padded, line, padded[: MAX_LINE_CHARS + 1], padded[:MAX_LINE_CHARS]])
