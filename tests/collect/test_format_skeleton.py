"""The skeleton the log formats share: the length limit before any reading, a format
string's fields compiled into named groups, a JSON object after a logging prefix, and
the values read from a line."""

import re

import pytest

from pinchpoint.logformats import NOT_A_RECORD, FormatError, Record, get_parser
from pinchpoint.logformats.base import MAX_LINE_CHARS, QUOTED, WORD
from pinchpoint.logformats.clock import first_scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import FormatParser, after_prefix, json_object, with_duration
from pinchpoint.logformats.template import TEXT_QUOTED, TEXT_WORD
from pinchpoint.logformats.values import ended, logged, to_float, to_int

# `<key>` fields of a toy format; `<%>` is a literal `%`.
_TOY_FIELD = re.compile(r"<([a-z%]+)>")


def _toy_field(match: re.Match[str], quoted: bool) -> Field | str:
    key = match.group(1)
    if key == "%":
        return "%"
    return Field(key, *field_pattern(key, {"n": r"\d+"}, {"w"}, quoted))


class _Keeping(FormatParser):
    """Keeps what it is given, to show what the skeleton passes on."""

    def __init__(self) -> None:
        self.read_lines: list[str] = []
        self.refusals = 0

    def read(self, line: str) -> Record | None:
        self.read_lines.append(line)
        return NOT_A_RECORD

    def refused(self) -> None:
        self.refusals += 1


class _Toy(FieldsParser):
    DURATION_KEYS = ("n",)

    def record(self, values: dict[str, str]) -> Record:
        return Record(duration_s=float(values["n"]), target=values.get("w", ""))


def test_a_line_past_the_limit_is_refused_before_the_format_reads_it() -> None:
    parser = _Keeping()
    at_limit, over = "a" * MAX_LINE_CHARS, "a" * (MAX_LINE_CHARS + 1)
    assert parser.parse(at_limit) is NOT_A_RECORD
    assert parser.parse(over) is None
    assert (parser.read_lines, parser.refusals) == ([at_limit], 1)
    assert parser.gives_duration is True


def test_a_csvlog_record_is_dropped_when_one_of_its_lines_is_too_long() -> None:
    first = (
        '2026-11-22 09:15:00.123 UTC,"app","shop",4242,"127.0.0.1:5555",691f2d5c.1092,1,'
        '"SELECT",2026-11-22 09:15:00 UTC,3/14,0,LOG,00000,"duration: 12.345 ms  statement: SELECT'
    )
    last = ' 1",,,,,,,,,"pp_run=r1&pp_users=4&pp_req=17","client backend",,0'
    parser = get_parser("postgresql", "csvlog")
    assert parser.parse(first) is NOT_A_RECORD  # the message goes on on the next line
    record = parser.parse(last)
    assert record is not None and record.duration_s == 0.012345
    assert parser.parse(first) is NOT_A_RECORD
    assert parser.parse("x" * (MAX_LINE_CHARS + 1)) is None
    assert parser.parse(last) is None  # its first line was dropped with the long one


def test_fields_become_named_groups_by_key_and_a_repeated_key_only_matches() -> None:
    regex, groups = compile_fields(
        '<w> <n>% "<q>" <n> <%>', _TOY_FIELD, _toy_field, "f{index}_{key}", "no field"
    )
    assert groups == {"w": "f0_w", "n": "f1_n", "q": "f2_q"}
    match = regex.fullmatch('GET 12% "a b" 7 %')
    assert match is not None
    assert match.group("f0_w", "f1_n", "f2_q") == ("GET", "12", "a b")
    assert regex.fullmatch('GET 12% "a b" x %') is None


def test_a_field_inside_quotes_is_a_quoted_value() -> None:
    seen: list[tuple[str, bool]] = []

    def field_of(match: re.Match[str], quoted: bool) -> Field | str:
        seen.append((match.group(1), quoted))
        return _toy_field(match, quoted)

    compile_fields('<w> "<q> <w>" <q>', _TOY_FIELD, field_of, "f{index}", "no field")
    assert seen == [("w", False), ("q", True), ("w", True), ("q", False)]
    assert field_pattern("q", {}, {"w"}, True) == (QUOTED, TEXT_QUOTED)
    assert field_pattern("w", {}, {"w"}, False) == (WORD, TEXT_WORD)
    assert field_pattern("n", {"n": r"\d+"}, {"w"}, True) == (r"\d+", None)


def test_a_format_string_without_a_field_is_refused() -> None:
    with pytest.raises(FormatError, match=r"^toy format has no <field>$"):
        compile_fields(
            "only <%> text", _TOY_FIELD, _toy_field, "f{index}", "toy format has no <field>"
        )


def test_a_fields_parser_reads_a_whole_line_by_key() -> None:
    parser = _Toy("<w> <n>", *compile_fields("<w> <n>", _TOY_FIELD, _toy_field, "f{index}", "-"))
    assert parser.parse("GET 12") == Record(duration_s=12.0, target="GET")
    assert parser.parse("GET 12 more") is None
    assert parser.parse("GET " + "1" * MAX_LINE_CHARS) is None
    assert parser.gives_duration is True
    no_duration = _Toy("<w>", *compile_fields("<w>", _TOY_FIELD, _toy_field, "f{index}", "-"))
    assert no_duration.gives_duration is False
    with pytest.raises(FormatError, match=r"^gives none$"):
        with_duration(no_duration, "gives none")
    assert with_duration(parser, "gives none") is parser


def test_a_json_object_is_read_after_a_logging_prefix() -> None:
    assert after_prefix('app: {"a": 1}') == {"a": 1}
    assert after_prefix("no object") is None
    assert after_prefix("[1] {") is None
    assert json_object('app: {"a": 1}') is None  # without a prefix
    assert json_object("[1, 2]") is None
    assert json_object("[" * 100_000 + "]" * 100_000) is None


def test_logged_values() -> None:
    values = {"ms": "x", "us": "1500", "s": "2"}
    assert first_scaled(values, [("none", 0), ("ms", -3), ("us", -6), ("s", 0)]) == 0.0015
    assert first_scaled(values, [("none", 0)]) is None
    assert (logged("-"), logged(None), logged("a")) == (None, None, "a")
    assert (ended(None, 1.0), ended(10.0, None), ended(10.0, 0.5)) == (None, 10.0, 10.5)
    assert (to_int("12"), to_int("1.5"), to_int(None), to_int("9" * 5000)) == (12, None, None, None)
    assert (to_float("1.5"), to_float("x"), to_float(None)) == (1.5, None, None)
