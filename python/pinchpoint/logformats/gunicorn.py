"""gunicorn access logs: the `--access-logformat` string itself is the format.

Atoms (`%(h)s`, `%(r)s`, `%({header}i)s`...) compile into a regex with one named
group per atom. What pinchpoint reads from a line:

- duration_s from `%(D)s` (microseconds), else `%(M)s` (milliseconds), else `%(L)s`
  (decimal seconds); `%(T)s` (whole seconds) is too coarse and is not used;
- status from `%(s)s`;
- ts from `%(t)s`, the time gunicorn logged the line (one-second resolution);
- the tag from `%(r)s` or `%(U)s` + `%(q)s`, or the header `%({x-pinchpoint}i)s`.

gunicorn gives no upstream time. A line longer than MAX_LINE_CHARS, a duration beyond
MAX_DURATION_S or a status outside 100-999 does not parse; the regex is built as
`template.py` says, so a line costs time linear in its length.
"""

import re

from pinchpoint.logformats.base import CLF_TIME, INT, STATUS_CODES, Record, parse_clf_time
from pinchpoint.logformats.fields import Field, FieldsParser, compile_fields, field_pattern
from pinchpoint.logformats.parsing import with_duration
from pinchpoint.logformats.values import duration, to_float, to_int

# The format pinchpoint configures gunicorn with (the demo stack uses exactly this).
GUNICORN_FORMAT = '%(h)s %(t)s "%(r)s" %(s)s %(b)s %(D)s'

_ATOM = re.compile(r"%\(([^)]*)\)[sd]|%%")

_TYPED = {
    "t": rf"\[{CLF_TIME}\]",
    "s": rf"(?:{INT}|-)",
    "b": rf"(?:{INT}|-)",
    "B": rf"(?:{INT}|None)",
    "D": INT,
    "M": INT,
    "T": INT,
    "L": rf"{INT}\.{INT}",
    "p": rf"<{INT}>",
}
# Atoms whose values never hold spaces.
_WORDS = {"h", "l", "u", "m", "q", "H"}
_DURATIONS = (("D", 1e-6), ("M", 1e-3), ("L", 1.0))
_HEADER = "{x-pinchpoint}i"


class GunicornParser(FieldsParser):
    DURATION_KEYS = tuple(atom for atom, _ in _DURATIONS)

    def record(self, values: dict[str, str]) -> Record | None:
        seconds = None
        for atom, unit in _DURATIONS:
            value = to_float(values.get(atom))
            if value is not None:
                seconds = duration(value * unit)
                if seconds is None:
                    return None
                break
        status = to_int(values.get("s"))
        if status is not None and status not in STATUS_CODES:
            return None
        target = values.get("r", "")
        if "U" in values:
            target += f" {values['U']}?{values.get('q', '')}"
        ts = values.get("t")
        return Record(
            duration_s=seconds,
            status=status,
            ts=parse_clf_time(ts[1:-1]) if ts else None,
            target=target,
            tag_header=values.get(_HEADER),
        )


def _field(match: re.Match[str], quoted: bool) -> Field | str:
    atom = match.group(1)
    if atom is None:  # `%%`
        return "%"
    if atom.startswith("{"):
        atom = atom.lower()  # gunicorn looks headers and environ keys up in lower case
    return Field(atom, *field_pattern(atom, _TYPED, _WORDS, quoted))


def compile_format(access_log_format: str) -> GunicornParser:
    """Compile a gunicorn `--access-logformat` string into a line parser."""
    no_field = f"gunicorn access log format has no %(atom)s: {access_log_format!r}"
    return GunicornParser(
        access_log_format,
        *compile_fields(access_log_format, _ATOM, _field, "a{index}", no_field),
    )


def parser_for(access_log_format: str | None) -> GunicornParser:
    """The parser for a format (default GUNICORN_FORMAT); it must log %(D)s, %(M)s or %(L)s."""
    return with_duration(
        compile_format(GUNICORN_FORMAT if access_log_format is None else access_log_format),
        "gunicorn access log format has no %(D)s, %(M)s or %(L)s, so it gives no duration; "
        f"add %(D)s (pinchpoint's format: {GUNICORN_FORMAT!r})",
    )
