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
    to_float,
    to_int,
    too_long,
)
from pinchpoint.logformats.template import TEXT_ANY, TEXT_QUOTED, TEXT_WORD, Template

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


def _atom_pattern(atom: str, quoted: bool) -> tuple[str, str | None]:
    """The pattern of an atom, and its kind of text (None if typed; see `template.py`)."""
    if atom in _TYPED:
        return _TYPED[atom], None
    if quoted:
        return QUOTED, TEXT_QUOTED
    return (WORD, TEXT_WORD) if atom in _WORDS else (ANY, TEXT_ANY)


@dataclass(frozen=True)
class GunicornParser:
    log_format: str
    regex: re.Pattern[str]
    groups: dict[str, str]  # atom -> its group name

    @property
    def gives_duration(self) -> bool:
        return any(atom in self.groups for atom, _ in _DURATIONS)

    def parse(self, line: str) -> Record | None:
        if too_long(line):
            return None
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        values = {atom: match.group(group) for atom, group in self.groups.items()}
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


def compile_format(access_log_format: str) -> GunicornParser:
    """Compile a gunicorn `--access-logformat` string into a line parser."""
    template = Template()
    literals = ""
    groups: dict[str, str] = {}
    end = 0
    for match in _ATOM.finditer(access_log_format):
        literal = access_log_format[end : match.start()]
        template.literal(literal)
        literals += literal
        end = match.end()
        atom = match.group(1)
        if atom is None:  # `%%`
            template.literal("%")
            literals += "%"
            continue
        if atom.startswith("{"):
            atom = atom.lower()  # gunicorn looks headers and environ keys up in lower case
        pattern, kind = _atom_pattern(atom, inside_quotes(literals))
        if atom in groups:
            template.field(f"(?:{pattern})", kind)
        else:
            groups[atom] = f"a{len(groups)}"
            template.field(f"(?P<{groups[atom]}>{pattern})", kind)
    if not groups:
        raise FormatError(f"gunicorn access log format has no %(atom)s: {access_log_format!r}")
    template.literal(access_log_format[end:])
    return GunicornParser(access_log_format, re.compile(template.regex()), groups)


def parser_for(access_log_format: str | None) -> GunicornParser:
    """The parser for a format (default GUNICORN_FORMAT); it must log %(D)s, %(M)s or %(L)s."""
    fmt = GUNICORN_FORMAT if access_log_format is None else access_log_format
    parser = compile_format(fmt)
    if not parser.gives_duration:
        raise FormatError(
            "gunicorn access log format has no %(D)s, %(M)s or %(L)s, so it gives no duration; "
            f"add %(D)s (pinchpoint's format: {GUNICORN_FORMAT!r})"
        )
    return parser
