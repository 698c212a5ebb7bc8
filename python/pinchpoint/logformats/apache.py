"""Apache httpd access logs: the `LogFormat` string itself is the format.

Directives (`%h`, `%>s`, `%{X-Pinchpoint}i`, `%{ms}T`, `%400,501{Referer}i`...) compile
into a regex with one group per directive. The string may be given as written inside
the quotes of a `LogFormat` line: `\\"` is read as `"` (and `\\\\`, `\\t` as `\\`, tab).
What pinchpoint reads from a line:

- duration_s from `%D` (microseconds), else `%{us}T`, `%{ms}T`, else `%T` / `%{s}T`
  (whole seconds, coarse);
- status from `%>s` (final status), else `%s`;
- ts from an end time `%{end:sec}t`, `%{end:msec}t` or `%{end:usec}t`, else the start
  of the request (`%t`, `%{sec}t`, `%{msec}t`, `%{usec}t`, `%{begin:...}t`) plus the
  duration;
- the tag from `%r`, or `%U` + `%q`, or the header `%{X-Pinchpoint}i`.

Apache gives no upstream time in its access log (mod_proxy's time is not a directive).
A line longer than MAX_LINE_CHARS or with a duration beyond MAX_DURATION_S does not
parse; a status below 100 reads as None. The regex is built as `template.py` says, so a
line costs time linear in its length.
"""

import re

from pinchpoint.logformats.base import ANY, CLF_TIME, INT, STATUS_CODES, Record, parse_clf_time
from pinchpoint.logformats.clock import first_scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.template import TEXT_ANY
from pinchpoint.logformats.values import duration, ended, logged, to_int

# pinchpoint's suggested format: Common Log Format plus %D.
APACHE_FORMAT = '%h %l %u %t "%r" %>s %b %D'

# `%`, then modifiers (`!`, `<`, `>`, status lists, `{argument}`), then the directive.
_DIRECTIVE = re.compile(r"%((?:[!<>,0-9]|\{[^}]*\})*)(\^t[io]|[A-Za-z%])")
_ARGUMENT = re.compile(r"\{([^}]*)\}")
_CONFIG_ESCAPE = re.compile(r"\\(.)")
_CONFIG_ESCAPES = {'"': '"', "\\": "\\", "t": "\t", "n": "\n"}

_DIGITS_OR_DASH = rf"(?:{INT}|-)"
_TYPED = {
    "D": INT,
    "T": INT,
    "s": r"(?:\d{3}|-)",
    "b": _DIGITS_OR_DASH,
    "B": INT,
    "I": INT,
    "O": INT,
    "S": INT,
    "k": INT,
    "P": _DIGITS_OR_DASH,
    "p": _DIGITS_OR_DASH,
}
_WORDS = {"h", "a", "A", "l", "u", "H", "m", "v", "V", "X", "L", "R", "q"}
_TIME_NUMBERS = {"sec", "msec", "usec", "msec_frac", "usec_frac"}
_TIME_UNITS = (("sec", 0), ("msec", -3), ("usec", -6))  # decimal exponents
# Duration keys, best first, with their unit.
_DURATIONS = (("D", -6), ("T:us", -6), ("T:ms", -3), ("T", 0), ("T:s", 0))
_HEADER = "i:x-pinchpoint"


def _config_unescape(text: str) -> str:
    return _CONFIG_ESCAPE.sub(lambda m: _CONFIG_ESCAPES.get(m.group(1), m.group(0)), text)


def _key(letter: str, modifiers: str) -> tuple[str, str | None]:
    """A directive's key (`D`, `>s`, `T:ms`, `i:x-pinchpoint`, `t:end:msec`) and argument."""
    found = _ARGUMENT.search(modifiers)
    argument = found.group(1) if found else None
    if letter == "s":
        return (">s" if ">" in modifiers else "s"), argument
    if argument is None:
        return letter, None
    if letter in "iCo" or letter.startswith("^"):
        return f"{letter}:{argument.lower()}", argument  # header names are case-insensitive
    return f"{letter}:{argument}", argument


def _time_pattern(argument: str | None) -> tuple[str, str | None]:
    if argument is None:
        return rf"\[{CLF_TIME}\]", None
    unit = argument.removeprefix("begin:").removeprefix("end:")
    return (INT, None) if unit in _TIME_NUMBERS else (ANY, TEXT_ANY)


def _directive_pattern(letter: str, argument: str | None, quoted: bool) -> tuple[str, str | None]:
    """The pattern of a directive, and its kind of text (None if typed; see `template.py`)."""
    if letter == "t":
        return _time_pattern(argument)
    return field_pattern(letter, _TYPED, _WORDS, quoted)


class ApacheParser(FieldsParser):
    DURATION_KEYS = tuple(key for key, _ in _DURATIONS)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = first_scaled(values, _DURATIONS)
        if seconds is not None and duration(seconds) is None:
            return None
        status = to_int(values.get(">s"))
        if status is None:
            status = to_int(values.get("s"))
        target = values.get("r", "")
        if "U" in values or "q" in values:
            target += f" {values.get('U', '')}{values.get('q', '')}"
        return Record(
            duration_s=seconds,
            status=status if status in STATUS_CODES else None,
            ts=_timestamp(values, seconds),
            target=target,
            tag_header=logged(values.get(_HEADER)),
        )


def _timestamp(values: dict[str, str], duration: float | None) -> float | None:
    end = first_scaled(values, ((f"t:end:{unit}", exponent) for unit, exponent in _TIME_UNITS))
    if end is not None:
        return end
    start = first_scaled(
        values,
        (
            (key, exponent)
            for unit, exponent in _TIME_UNITS
            for key in (f"t:{unit}", f"t:begin:{unit}")
        ),
    )
    if start is None and "t" in values:
        start = parse_clf_time(values["t"][1:-1])
    return ended(start, duration)


def _field(match: re.Match[str], quoted: bool) -> Field | str:
    modifiers, letter = match.groups()
    if letter == "%":
        return "%"
    key, argument = _key(letter, modifiers)
    pattern, kind = _directive_pattern(letter, argument, quoted)
    if re.search(r"[0-9!]", _ARGUMENT.sub("", modifiers)):
        pattern = f"(?:{pattern}|-)"  # a status condition not met logs `-`
    return Field(key, pattern, kind)


def compile_format(log_format: str) -> ApacheParser:
    """Compile an Apache `LogFormat` string into a line parser."""
    fmt = _config_unescape(log_format).rstrip("\n")
    no_field = f"Apache LogFormat has no %directive: {log_format!r}"
    return ApacheParser(log_format, *compile_fields(fmt, _DIRECTIVE, _field, "d{index}", no_field))


def parser_for(log_format: str | None) -> ApacheParser:
    """The parser for a LogFormat (default APACHE_FORMAT); it must log %D or %T."""
    return with_duration(
        compile_format(APACHE_FORMAT if log_format is None else log_format),
        "Apache LogFormat has no %D or %T, so it gives no duration; "
        f"add %D (pinchpoint's format: {APACHE_FORMAT!r})",
    )
