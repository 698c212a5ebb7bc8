"""Express (Node.js) access logs written by morgan: the format string given to `morgan()`
is the format, or the name of one of morgan's own (`dev`, `short`, `tiny`; `combined`
and `common` log no duration).

Tokens (`:method`, `:url`, `:status`, `:response-time`, `:req[x-pinchpoint]`,
`:date[iso]`...) compile into a regex with one group per token. What pinchpoint reads:

- duration_s from `:total-time` (milliseconds, until the response was sent), else
  `:response-time` (milliseconds, until its headers were written), any `[digits]`; `-`
  (morgan's value when the response never finished) gives None;
- status from `:status`;
- ts from `:date` (`:date[web]`, `:date[clf]`, `:date[iso]`): morgan logs when the
  response finished, so that is when the request ended;
- the tag from `:url`, or the header `:req[x-pinchpoint]`.

`dev` colours its status with terminal escapes: they are left out before the line is
read. morgan escapes nothing and gives no upstream time. A line longer than MAX_LINE_CHARS
with a duration beyond MAX_DURATION_S or a status outside 100-999 does not parse; a
status of `-` reads as None. The regex is built as `template.py` says, so a line costs time linear in its length.
"""

import re
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from pinchpoint.logformats.base import (
    CLF_TIME,
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
from pinchpoint.logformats.values import duration, logged, to_int

_COMBINED = (
    ':remote-addr - :remote-user [:date[clf]] ":method :url HTTP/:http-version" :status '
    ':res[content-length] ":referrer" ":user-agent"'
)
# morgan's named formats (`dev` without its colours).
NAMED = {
    "combined": _COMBINED,
    "common": (
        ':remote-addr - :remote-user [:date[clf]] ":method :url HTTP/:http-version" :status '
        ":res[content-length]"
    ),
    "dev": ":method :url :status :response-time ms - :res[content-length]",
    "short": (
        ":remote-addr :remote-user :method :url HTTP/:http-version :status "
        ":res[content-length] - :response-time ms"
    ),
    "tiny": ":method :url :status :res[content-length] - :response-time ms",
}
# pinchpoint's suggested format: `combined` plus the time until the response was sent.
MORGAN_FORMAT = f"{_COMBINED} :total-time"

# As morgan reads its tokens: a name of two or more word characters or `-`, `[argument]`.
_TOKEN = re.compile(r":([-\w]{2,})(?:\[([^\]]+)\])?")
# The terminal colour escapes of `dev`.
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")

_NUMBER_OR_DASH = rf"(?:{NUMBER}|-)"
_DATES = {
    "clf": CLF_TIME,
    "iso": r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z",
    "web": r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT",
}
_TYPED = {
    "status": r"(?:\d{3}|-)",
    "response-time": _NUMBER_OR_DASH,
    "total-time": _NUMBER_OR_DASH,
}
_WORDS = {"url", "method", "http-version", "remote-addr", "remote-user"}
_DURATIONS = (("total-time", -3), ("response-time", -3))
_HEADER = "req:x-pinchpoint"


def _key(name: str, argument: str | None) -> str:
    """A token's key: `status`, `date:iso`, `req:x-pinchpoint`; the digits of a time are
    left out."""
    if name == "date":
        return f"date:{argument or 'web'}"
    if name in ("req", "res") and argument is not None:
        return f"{name}:{argument.lower()}"  # header names are case-insensitive
    return name


def _web_time(text: str) -> float | None:
    try:
        return parsedate_to_datetime(text).timestamp()
    except (ValueError, TypeError):
        return None


_PARSE_DATE = {"date:clf": parse_clf_time, "date:iso": parse_iso_time, "date:web": _web_time}


@dataclass(frozen=True)
class MorganParser(FieldsParser):
    DURATION_KEYS = tuple(key for key, _ in _DURATIONS)
    # Whether terminal colour escapes are left out of a line before it is read (`dev`).
    colours: bool = False

    def read(self, line: str) -> Record | None:
        return super().read(_COLOURS.sub("", line) if self.colours else line)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = first_scaled(values, _DURATIONS)
        if seconds is not None and duration(seconds) is None:
            return None
        status = to_int(values.get("status"))
        return Record(
            duration_s=seconds,
            status=status if status in STATUS_CODES else None,
            ts=_timestamp(values),
            target=values.get("url", ""),
            tag_header=logged(values.get(_HEADER)),
        )


def _timestamp(values: dict[str, str]) -> float | None:
    for key, parse in _PARSE_DATE.items():
        if key in values:
            return parse(values[key])
    return None


def _field(match: re.Match[str], quoted: bool) -> Field:
    name, argument = match.groups()
    key = _key(name, argument)
    if name == "date":
        if key[5:] not in _DATES:
            raise FormatError(
                f"morgan's :date takes clf, iso or web, not {argument!r} ({match.group(0)})"
            )
        return Field(key, _DATES[key[5:]], None)
    return Field(key, *field_pattern(name, _TYPED, _WORDS, quoted))


def compile_format(log_format: str) -> MorganParser:
    """Compile a morgan format string, or one of its names, into a line parser."""
    fmt = NAMED.get(log_format.strip(), log_format)
    no_field = f"morgan format has no :token: {log_format!r}"
    regex, groups = compile_fields(fmt, _TOKEN, _field, "m{index}", no_field)
    return MorganParser(log_format, regex, groups, log_format.strip() == "dev")


def parser_for(log_format: str | None) -> MorganParser:
    """The parser for a format (default MORGAN_FORMAT); it must log :total-time or
    :response-time."""
    name = None if log_format is None else log_format.strip()
    if name in ("combined", "common"):
        raise FormatError(
            f"morgan's {name!r} format logs no duration; log with "
            f"{NAMED[name] + ' :total-time'!r} (morgan(format) takes the string)"
        )
    return with_duration(
        compile_format(MORGAN_FORMAT if log_format is None else log_format),
        "morgan format has no :total-time or :response-time, so it gives no duration; "
        f"add :total-time (pinchpoint's format: {MORGAN_FORMAT!r})",
    )
