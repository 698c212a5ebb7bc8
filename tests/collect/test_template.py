"""Format strings compiled into atomic groups (logformats/template.py): where a text field
ends, and lines that once backtracked for minutes, parsed now in one pass."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinchpoint.logformats import get_parser
from pinchpoint.logformats.base import QUOTED
from pinchpoint.logformats.nginx import compile_format
from pinchpoint.logformats.template import (
    TEXT_ANY,
    TEXT_QUOTED,
    TEXT_WORD,
    Template,
    splits,
)


def test_a_group_starts_at_each_text_field_and_holds_the_typed_fields_after_it() -> None:
    template = Template()
    template.literal("[")
    template.field(r"(?P<a>\S*?)", TEXT_WORD)
    template.literal(" ")
    template.field(r"(?P<n>\d{1,3})", None)
    template.field(r"(?P<b>.*?)", TEXT_ANY)
    # A word before a space ends there only: it is made possessive, which is faster.
    assert template.groups() == [r"\[", r"(?P<a>\S*+)\ (?P<n>\d{1,3})", "(?P<b>.*?)"]
    regex = template.regex()
    assert regex == r"(?>\[)(?>(?P<a>\S*+)\ (?P<n>\d{1,3}))(?>(?P<b>.*?)\Z)"
    match = re.fullmatch(regex, "[ab 12x y")
    assert match is not None
    assert match.group("a", "n", "b") == ("ab", "12", "x y")


@pytest.mark.parametrize(
    ("earlier", "literal", "later", "split"),
    [
        (TEXT_WORD, " ", TEXT_WORD, True),  # a word ends at the space
        (TEXT_QUOTED, '" "', TEXT_QUOTED, True),  # a quoted value ends at its quote
        (TEXT_ANY, " ", TEXT_ANY, True),  # free text holds what the earlier one would
        (TEXT_WORD, ":", TEXT_WORD, True),
        (TEXT_WORD, "", TEXT_WORD, True),
        (TEXT_ANY, " ", TEXT_WORD, False),  # free text may end at a later space
        (TEXT_ANY, "", TEXT_WORD, False),
        (TEXT_WORD, ":", TEXT_QUOTED, False),
        (TEXT_QUOTED, ", ", TEXT_QUOTED, True),
        (TEXT_QUOTED, '", "', TEXT_WORD, True),
        (TEXT_QUOTED, "\\", TEXT_QUOTED, False),
    ],
)
def test_where_a_text_field_may_start_a_group(
    earlier: str, literal: str, later: str, split: bool
) -> None:
    assert splits(earlier, literal, later) is split


def test_a_quoted_value_before_its_quote_is_possessive_and_matches_the_same() -> None:
    template = Template()
    template.literal('"')
    template.field(f"(?P<a>{QUOTED})", TEXT_QUOTED)
    template.literal('" "')
    template.field(f"(?P<b>{QUOTED})", TEXT_QUOTED)
    template.literal(" ")
    regex = template.regex()
    assert regex.count(r"(?:[^\"\\]++|\\.)*+") == 1  # `b` may end at any space
    lazy = r'"(?P<a>(?:[^"\\]|\\.)*?)" "(?P<b>(?:[^"\\]|\\.)*?) '
    for line in ['"a \\" b" "c d ', '"a\\\\" "x" ', '"\\', '"a" "b\\ c d ', '"" " ']:
        got, expected = re.fullmatch(regex, line), re.fullmatch(lazy, line)
        assert (got and got.groupdict()) == (expected and expected.groupdict()), line


def test_free_text_shares_its_group_with_a_word_after_it() -> None:
    template = Template()
    template.field("(?P<a>.*?)", TEXT_ANY)
    template.literal(" ")
    template.field(r"(?P<b>\S*?)", TEXT_WORD)
    template.literal(" ")
    template.field(r"(?P<c>\S*?)", TEXT_WORD)
    template.field("(?P<d>.*?)", TEXT_ANY)
    assert template.groups() == [r"(?P<a>.*?)\ (?P<b>\S*+)\ ", r"(?P<c>\S*?)", "(?P<d>.*?)"]
    record = compile_format("$http_a $uri $request_time").parse("x y z 0.5")
    assert record is not None
    assert record.duration_s == 0.5
    apache = get_parser("apache", "%m %U%q %>s %D").parse("GET /a b?pp_run=r1 200 15")
    assert apache is not None
    assert apache.target.strip() == "/a b?pp_run=r1"


def test_a_text_field_keeps_the_first_end_from_which_its_group_matches() -> None:
    parser = compile_format("$http_a $status $uri $request_time")
    record = parser.parse("a b 200 /x 0.5")
    assert record is not None
    assert (record.status, record.duration_s) == (200, 0.5)
    # `$http_a` ends before the first ` 200 `; `$uri` cannot then take `b 200 /x`.
    assert parser.parse("a 200 b 200 /x 0.5") is None
    # Typed fields after a text field still make it try later ends.
    typed = compile_format("$request $status $request_time").parse("GET /a b HTTP/1.1 200 0.5")
    assert typed is not None
    assert (typed.target, typed.status) == ("GET /a b HTTP/1.1", 200)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("log_format", "line"),
    [
        # Adjacent numbers and words: cubic when every end of each was tried against the others.
        (
            "$status$request_time$upstream_response_time${request_uri}x$msec",
            "200" + "1" * 60_000 + "y",
        ),
        ("$remote_addr $uri$is_args$args $status $request_time", "1.2.3.4 /" + "a" * 60_000),
        ("$http_a $http_b $http_c $http_d $http_e $http_f $request_time", "x " * 30_000),
        ("$http_a:$http_b:$http_c $request_time", ":" * 60_000),
    ],
)
def test_lines_that_do_not_match_are_refused_in_one_pass(log_format: str, line: str) -> None:
    assert compile_format(log_format).parse(line) is None


# Free text, a literal with no space, then a word: written to end at the first literal of a
# run of non-space text. The same records as the plain lazy pattern, on any line.
TEXT_COLON_WORD = "$remote_addr [$time_local] $status $http_a:$uri $request_time"


@settings(max_examples=400)
@given(
    st.text(alphabet="a: /", max_size=30),
    st.text(alphabet="a: /", max_size=12),
    st.sampled_from(["0.5", "x", "1"]),
)
def test_free_text_then_a_word_matches_as_the_lazy_pattern_does(
    head: str, tail: str, time_field: str
) -> None:
    parser = get_parser("nginx", TEXT_COLON_WORD)
    fast = parser.regex  # type: ignore[attr-defined]
    plain = re.compile(fast.pattern.replace(r"(?:.*?\s)??(?:(?!:)\S)*+", ".*?"))
    assert plain.pattern != fast.pattern
    line = f"1.2.3.4 [10/Oct/2026:13:55:36 +0000] 200 {head}:{tail} {time_field}"
    found, expected = fast.match(line), plain.match(line)
    assert (found is None) == (expected is None)
    if found and expected:
        assert found.groupdict() == expected.groupdict()
