"""PHP-FPM access logs: a pool's `access.format` string is the format.

Its own tokens (`%R`, `%t`, `%m`, `%r%Q%q`, `%s`, `%{mili}d`, `%{HTTP_X_PINCHPOINT}e`...)
compile into a regex with one group per token. The string may be given as written inside
the quotes of the pool file: `\\"` is read as `"`. What pinchpoint reads from a line:

- duration_s from `%d` (decimal seconds), `%{mili}d` / `%{milli}d` / `%{milliseconds}d`
  (decimal milliseconds) or `%{micro}d` / `%{microseconds}d` (whole microseconds);
- status from `%s`;
- ts from `%T` (when the line was written, the request done), else `%t` (when the request
  was received) plus the duration: PHP-FPM's default time is `22/Nov/2026:10:15:00 +0100`
  without brackets; a `%{strftime}t` time is read when it is ISO 8601
  (`%{%Y-%m-%dT%H:%M:%S%z}t`);
- the tag from `%r` (the URI without its query) + `%q` (the query string), or the header
  `%{HTTP_X_PINCHPOINT}e`.

PHP-FPM's default `access.format` (`%R - %u %t "%m %r" %s`) logs neither the duration
nor the query, so pinchpoint cannot use it; its suggested one is PHP_FPM_FORMAT. PHP-FPM
logs `-` for an absent variable and gives no upstream time. A line longer than
MAX_LINE_CHARS, with a duration beyond MAX_DURATION_S or a status outside 100-999 does
not parse. The regex is built as `template.py` says, so a line costs time
linear in its length.
"""

import re
from dataclasses import dataclass

from pinchpoint.logformats.base import (
    CLF_TIME,
    INT,
    NUMBER,
    STATUS_CODES,
    FormatError,
    Record,
    parse_clf_time,
    parse_iso_time,
)
from pinchpoint.logformats.clock import first_scaled
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.template import TEXT_ANY
from pinchpoint.logformats.values import duration, logged, to_int

# pinchpoint's suggested format: PHP-FPM's default with the query and the duration.
PHP_FPM_FORMAT = '%R - %u %t "%m %r%Q%q" %s %{mili}d'
# PHP-FPM's own default; it logs no duration.
DEFAULT_FORMAT = '%R - %u %t "%m %r" %s'

# `%`, then `{argument}` or nothing, then the token.
_TOKEN = re.compile(r"%(?:\{([^}]*)\})?([A-Za-z%])")
_CONFIG_ESCAPE = re.compile(r"\\(.)")

_TYPED = {
    "C": NUMBER,
    "d": NUMBER,
    "l": INT,
    "M": INT,
    "p": INT,
    "P": INT,
    "s": r"\d{3}",
    "Q": r"\??",
    # The URI without its query holds no `?`: it ends where %Q%q starts.
    "r": r"[^?\s\"]*+",
}
_WORDS = {"m", "n", "q", "R", "u"}
# The units of %d by its argument, as decimal exponents.
_DURATION_UNITS = {
    None: 0,
    "seconds": 0,
    "mili": -3,
    "milli": -3,
    "miliseconds": -3,
    "milliseconds": -3,
    "micro": -6,
    "microseconds": -6,
}
_HEADER = "e:HTTP_X_PINCHPOINT"


def _key(letter: str, argument: str | None) -> str:
    """A token's key: `d`, `t`, `t:%Y-%m-%d`, `e:HTTP_X_PINCHPOINT`."""
    if letter in "tT" and argument is not None:
        return f"{letter}:text"
    if letter in "dCM":
        return letter  # one duration, CPU, memory whatever their units
    return letter if argument is None else f"{letter}:{argument}"


def _pattern(letter: str, argument: str | None, quoted: bool) -> tuple[str, str | None]:
    """The pattern of a token, and its kind of text (None if typed; see `template.py`)."""
    if letter in "tT":
        return (CLF_TIME, None) if argument is None else (r".*?", TEXT_ANY)
    return field_pattern(letter, _TYPED, _WORDS, quoted)


@dataclass(frozen=True)
class PhpFpmParser(FieldsParser):
    DURATION_KEYS = ("d",)
    # The decimal exponent of the unit of the format's %d.
    unit: int = 0

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = first_scaled(values, (("d", self.unit),))
        if seconds is not None and duration(seconds) is None:
            return None
        status = to_int(values.get("s"))
        target = values.get("r", "")
        if values.get("q"):
            target += f"?{values['q']}"
        return Record(
            duration_s=seconds,
            status=status if status in STATUS_CODES else None,
            ts=_timestamp(values, seconds),
            target=target,
            tag_header=logged(values.get(_HEADER)),
        )


def _time(values: dict[str, str], letter: str) -> float | None:
    if letter in values:
        return parse_clf_time(values[letter])
    text = values.get(f"{letter}:text")
    return None if text is None else parse_iso_time(text)


def _timestamp(values: dict[str, str], seconds: float | None) -> float | None:
    end = _time(values, "T")
    if end is not None:
        return end
    start = _time(values, "t")
    return None if start is None else start + (seconds or 0.0)


def _field(match: re.Match[str], quoted: bool) -> Field | str:
    argument, letter = match.groups()
    if letter == "%":
        return "%"
    return Field(_key(letter, argument), *_pattern(letter, argument, quoted))


def _duration_unit(fmt: str, log_format: str) -> int:
    for argument, letter in _TOKEN.findall(fmt):
        if letter == "d":
            unit = _DURATION_UNITS.get(argument.lower() or None)
            if unit is None:
                raise FormatError(
                    f"PHP-FPM access.format has %{{{argument}}}d, which PHP-FPM does not "
                    f"know: use %d, %{{mili}}d or %{{micro}}d ({log_format!r})"
                )
            return unit
    return 0


def compile_format(access_format: str) -> PhpFpmParser:
    """Compile a PHP-FPM `access.format` string into a line parser."""
    fmt = _CONFIG_ESCAPE.sub(r"\1", access_format)
    no_field = f"PHP-FPM access.format has no %token: {access_format!r}"
    regex, groups = compile_fields(fmt, _TOKEN, _field, "f{index}", no_field)
    return PhpFpmParser(access_format, regex, groups, _duration_unit(fmt, access_format))


def parser_for(access_format: str | None) -> PhpFpmParser:
    """The parser for an access.format (default PHP_FPM_FORMAT); it must log %d."""
    return with_duration(
        compile_format(PHP_FPM_FORMAT if access_format is None else access_format),
        "PHP-FPM access.format has no %d, so it gives no duration (PHP-FPM's default "
        f"{DEFAULT_FORMAT!r} logs none); add %{{mili}}d and %Q%q "
        f"(pinchpoint's format: {PHP_FPM_FORMAT!r})",
    )
