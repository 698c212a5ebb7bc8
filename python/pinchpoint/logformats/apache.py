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
from dataclasses import dataclass

from pinchpoint.logformats.base import (
    ANY,
    CLF_TIME,
    INT,
    QUOTED,
    STATUS_CODES,
    WORD,
    FormatError,
    Record,
    duration,
    inside_quotes,
    parse_clf_time,
    to_int,
    too_long,
)
from pinchpoint.logformats.clock import scaled
from pinchpoint.logformats.template import TEXT_ANY, TEXT_QUOTED, TEXT_WORD, Template

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
_TIME_UNITS = {"sec": 0, "msec": -3, "usec": -6}  # decimal exponents
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
    if letter in _TYPED:
        return _TYPED[letter], None
    if quoted:
        return QUOTED, TEXT_QUOTED
    return (WORD, TEXT_WORD) if letter in _WORDS else (ANY, TEXT_ANY)


@dataclass(frozen=True)
class ApacheParser:
    log_format: str
    regex: re.Pattern[str]
    groups: dict[str, str]  # directive key -> its group name

    @property
    def gives_duration(self) -> bool:
        return any(key in self.groups for key, _ in _DURATIONS)

    def parse(self, line: str) -> Record | None:
        if too_long(line):
            return None
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        values = {key: match.group(group) for key, group in self.groups.items()}
        seconds = None
        for key, exponent in _DURATIONS:
            seconds = scaled(values.get(key), exponent)
            if seconds is not None:
                seconds = duration(seconds)
                if seconds is None:
                    return None
                break
        status = to_int(values.get(">s"))
        if status is None:
            status = to_int(values.get("s"))
        if status not in STATUS_CODES:
            status = None
        target = values.get("r", "")
        if "U" in values or "q" in values:
            target += f" {values.get('U', '')}{values.get('q', '')}"
        header = values.get(_HEADER)
        return Record(
            duration_s=seconds,
            status=status,
            ts=_timestamp(values, seconds),
            target=target,
            tag_header=header if header not in (None, "-") else None,
        )


def _timestamp(values: dict[str, str], duration: float | None) -> float | None:
    for unit, exponent in _TIME_UNITS.items():
        end = scaled(values.get(f"t:end:{unit}"), exponent)
        if end is not None:
            return end
    start = None
    for unit, exponent in _TIME_UNITS.items():
        for key in (f"t:{unit}", f"t:begin:{unit}"):
            if start is None:
                start = scaled(values.get(key), exponent)
    if start is None and "t" in values:
        start = parse_clf_time(values["t"][1:-1])
    if start is None:
        return None
    return start + (duration or 0.0)


def compile_format(log_format: str) -> ApacheParser:
    """Compile an Apache `LogFormat` string into a line parser."""
    fmt = _config_unescape(log_format).rstrip("\n")
    template = Template()
    literals = ""
    groups: dict[str, str] = {}
    end = 0
    for match in _DIRECTIVE.finditer(fmt):
        literal = fmt[end : match.start()]
        template.literal(literal)
        literals += literal
        end = match.end()
        modifiers, letter = match.groups()
        if letter == "%":
            template.literal("%")
            literals += "%"
            continue
        key, argument = _key(letter, modifiers)
        pattern, kind = _directive_pattern(letter, argument, inside_quotes(literals))
        if re.search(r"[0-9!]", _ARGUMENT.sub("", modifiers)):
            pattern = f"(?:{pattern}|-)"  # a status condition not met logs `-`
        if key in groups:
            template.field(f"(?:{pattern})", kind)
        else:
            groups[key] = f"d{len(groups)}"
            template.field(f"(?P<{groups[key]}>{pattern})", kind)
    if not groups:
        raise FormatError(f"Apache LogFormat has no %directive: {log_format!r}")
    template.literal(fmt[end:])
    return ApacheParser(log_format, re.compile(template.regex()), groups)


def parser_for(log_format: str | None) -> ApacheParser:
    """The parser for a LogFormat (default APACHE_FORMAT); it must log %D or %T."""
    parser = compile_format(APACHE_FORMAT if log_format is None else log_format)
    if not parser.gives_duration:
        raise FormatError(
            "Apache LogFormat has no %D or %T, so it gives no duration; "
            f"add %D (pinchpoint's format: {APACHE_FORMAT!r})"
        )
    return parser
