"""Tomcat access logs (AccessLogValve): the valve's `pattern` is the format.

Patterns (`%h %l %u %t "%r" %s %b %D`, `%{X-Pinchpoint}i`, `%{ms}T`, `%{end:msec}t`...)
compile into a regex with one group per pattern code; `common` and `combined` name the
valve's own patterns. The pattern may be given as written in server.xml: `&quot;` is read
as `"` (and the other XML entities as their characters). What pinchpoint reads, with
Tomcat 10's units (a real Tomcat 10.1 logged 152590 for `%D` of a 150 ms request):

- duration_s from `%D` (microseconds; milliseconds in Tomcat 9 and earlier), else
  `%{us}T`, `%{ns}T`, `%{ms}T`, `%{fracsec}T`, else `%T` (whole seconds, coarse);
  `%F` (time to commit the response) is not the request's time;
- status from `%s`;
- ts from `%t` or `%{sec}t`, `%{msec}t`, `%{end:...}t`: Tomcat logs when the request
  ended there, unlike Apache; else `%{begin:sec}t` or `%{begin:msec}t` plus the duration;
- the tag from `%r`, or `%U` + `%q`, or the header `%{X-Pinchpoint}i`.

Tomcat logs `-` for an empty `%q` and gives no upstream time. A line longer than
MAX_LINE_CHARS, with a duration beyond MAX_DURATION_S or a status outside 100-999 does
not parse; a status of `-` reads as None. The regex is built as `template.py` says, so a line costs time
linear in its length.
"""

import html
import re

from pinchpoint.logformats.base import (
    CLF_TIME,
    INT,
    NUMBER,
    STATUS_CODES,
    FormatError,
    Record,
    parse_clf_time,
)
from pinchpoint.logformats.clock import first_scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.template import TEXT_ANY
from pinchpoint.logformats.values import duration, logged, to_int

# pinchpoint's suggested pattern: `common` plus %D.
TOMCAT_FORMAT = '%h %l %u %t "%r" %s %b %D'
# The valve's named patterns; neither logs a duration.
NAMED = {
    "common": '%h %l %u %t "%r" %s %b',
    "combined": '%h %l %u %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"',
}

# `%`, then `{argument}` or nothing, then the code.
_CODE = re.compile(r"%(?:\{([^}]*)\})?([A-Za-z%])")

_DIGITS_OR_DASH = rf"(?:{INT}|-)"
_TYPED = {
    "D": INT,
    "T": INT,
    "F": INT,
    "s": r"(?:\d{3}|-)",
    "b": _DIGITS_OR_DASH,
    "B": INT,
    "p": INT,
    # The path holds no `?`: it ends where %q starts.
    "U": r"[^?\s\"]*+",
}
_WORDS = {"a", "A", "h", "H", "l", "m", "q", "S", "u", "v", "X"}
_TIME_NUMBERS = {"sec", "msec", "msec_frac"}
_TIME_UNITS = (("msec", -3), ("sec", 0))  # decimal exponents, finest first
# Duration keys, best first, with their unit.
_DURATIONS = (
    ("D", -6),
    ("T:us", -6),
    ("T:ns", -9),
    ("T:ms", -3),
    ("T:fracsec", 0),
    ("T", 0),
    ("T:s", 0),
)
_HEADER = "i:x-pinchpoint"


def _key(letter: str, argument: str | None) -> str:
    """A code's key: `D`, `T:ms`, `i:x-pinchpoint`, `t:end:msec`."""
    if argument is None:
        return letter
    if letter in "ioc":
        return f"{letter}:{argument.lower()}"  # header names are case-insensitive
    return f"{letter}:{argument}"


def _pattern(letter: str, argument: str | None, quoted: bool) -> tuple[str, str | None]:
    """The pattern of a code, and its kind of text (None if typed; see `template.py`)."""
    if letter == "t":
        if argument is None:
            return rf"\[{CLF_TIME}\]", None
        unit = argument.removeprefix("begin:").removeprefix("end:")
        return (INT, None) if unit in _TIME_NUMBERS else (r".*?", TEXT_ANY)
    if letter == "T" and argument == "fracsec":
        return NUMBER, None
    return field_pattern(letter, _TYPED, _WORDS, quoted)


class TomcatParser(FieldsParser):
    DURATION_KEYS = tuple(key for key, _ in _DURATIONS)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = first_scaled(values, _DURATIONS)
        if seconds is not None and duration(seconds) is None:
            return None
        status = to_int(values.get("s"))
        target = values.get("r", "")
        if "U" in values or "q" in values:
            query = values.get("q", "")
            target += f" {values.get('U', '')}{'' if query == '-' else query}"
        return Record(
            duration_s=seconds,
            status=status if status in STATUS_CODES else None,
            ts=_timestamp(values, seconds),
            target=target,
            tag_header=logged(values.get(_HEADER)),
        )


def _timestamp(values: dict[str, str], seconds: float | None) -> float | None:
    end = first_scaled(
        values,
        (
            (key, exponent)
            for unit, exponent in _TIME_UNITS
            for key in (f"t:{unit}", f"t:end:{unit}")
        ),
    )
    if end is not None:
        return end
    if "t" in values:
        return parse_clf_time(values["t"][1:-1])
    start = first_scaled(values, ((f"t:begin:{unit}", exponent) for unit, exponent in _TIME_UNITS))
    return None if start is None else start + (seconds or 0.0)


def _field(match: re.Match[str], quoted: bool) -> Field | str:
    argument, letter = match.groups()
    if letter == "%":
        return "%"
    return Field(_key(letter, argument), *_pattern(letter, argument, quoted))


def compile_format(pattern: str) -> TomcatParser:
    """Compile an AccessLogValve pattern (or `common`, `combined`) into a line parser."""
    fmt = NAMED.get(pattern.strip(), html.unescape(pattern))
    no_field = f"Tomcat access log pattern has no %code: {pattern!r}"
    return TomcatParser(pattern, *compile_fields(fmt, _CODE, _field, "c{index}", no_field))


def parser_for(pattern: str | None) -> TomcatParser:
    """The parser for a pattern (default TOMCAT_FORMAT); it must log %D or %T."""
    if pattern is not None and pattern.strip() in NAMED:
        raise FormatError(
            f"Tomcat's {pattern.strip()!r} pattern logs no duration; give the valve the "
            f"pattern with %D added: {NAMED[pattern.strip()] + ' %D'!r}"
        )
    return with_duration(
        compile_format(TOMCAT_FORMAT if pattern is None else pattern),
        "Tomcat access log pattern has no %D or %T, so it gives no duration; "
        f"add %D (pinchpoint's pattern: {TOMCAT_FORMAT!r})",
    )
