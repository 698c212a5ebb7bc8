"""PostgreSQL statement durations (`log_min_duration_statement`, or `log_duration`).

The log_format says how the server writes its log:

- a `log_line_prefix` (default `%m [%p] `, PostgreSQL's own): stderr lines such as
  `2026-11-22 09:15:00.123 UTC [4242] LOG:  duration: 12.345 ms  statement: SELECT 1`.
  Escapes `%a %u %d %b %c %p %P %l %m %t %n %s %i %r %h %e %v %x %Q %q %%` compile,
  with padding (`%-20a`);
- `csvlog`: the CSV log (`log_destination = 'csvlog'`), columns in the order of
  PostgreSQL 13 to 17 (log_time first, message 14th, application_name 23rd);
- `jsonlog`: the JSON log of PostgreSQL 15+ (`log_destination = 'jsonlog'`).

Records are the `LOG` messages `duration: N ms` with `statement: ...` (simple
protocol), `execute <name>: ...` (extended protocol) or nothing after them. The
extended protocol's `parse` and `bind` duration lines, every other message, and the
continuation lines of a message written over several lines give NOT_A_RECORD: they are
the server's and hold no record, whatever comment (of pinchpoint or another tool, such
as sqlcommenter's `traceparent`) they carry, and count as untagged. None is left to
lines not in the log's format. duration_s is the logged duration; there is no upstream
time and no status.

The run tag, in either place (the statement's comment wins when both have one):

- `application_name` (`%a` in the prefix; a column of csvlog and jsonlog) holding the
  query form `pp_run=<id>&pp_users=<n>&pp_req=<id>` or the header form
  `run=<id>; users=<n>; req=<id>`, e.g. `PGAPPNAME=pp_run=r1&pp_users=4&pp_req=17`.
  PostgreSQL keeps the first 63 bytes of an application_name;
- a comment in the statement: sqlcommenter style `/*pp_run='r1',pp_users='4',pp_req='17'*/`
  (values URL-encoded, other keys ignored), or a query string `/* pp_run=r1&pp_users=4 */`.
  In the stderr log a statement written over several lines has its later lines on
  lines of their own, so a comment at its end is not seen there: use application_name,
  csvlog or jsonlog for such statements.

ts is the time the line was logged (the statement's end): `%n`, else `%m` / `%t`
(log_time / timestamp in csvlog and jsonlog) when the zone is UTC, a numeric offset or
this machine's own zone abbreviation; otherwise None. Messages are read in English
(`lc_messages = 'C'` or an English locale).

A line longer than MAX_LINE_CHARS (a csvlog record over several lines: all of them
together), or whose duration is beyond MAX_DURATION_S, does not parse. A prefix's regex
is built as `template.py` says, and comments are found in one pass, so a line costs time
linear in its length.
"""

import csv
import re
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import unquote

from pinchpoint.logformats.base import (
    ANY,
    INT,
    MAX_LINE_CHARS,
    NOT_A_RECORD,
    NUMBER,
    FormatError,
    Record,
)
from pinchpoint.logformats.clock import scaled, zoned_timestamp
from pinchpoint.logformats.fields import Field, add_fields
from pinchpoint.logformats.parsing import FormatParser, json_object
from pinchpoint.logformats.tag import find_tag
from pinchpoint.logformats.template import TEXT_ANY, TEXT_STAMP, TEXT_WORD, Template, atomic
from pinchpoint.logformats.values import duration, to_float

# PostgreSQL's default log_line_prefix.
POSTGRESQL_PREFIX = "%m [%p] "
CSVLOG = "csvlog"
JSONLOG = "jsonlog"

_DATE_TIME = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
# Words are lazy, so that a word before a literal ends at its first place (`template.py`).
_ZONED = rf"{_DATE_TIME}(?:\.\d{{1,9}})? \S+?"
_ESCAPE = re.compile(r"%(-?\d*)([A-Za-z%])")
# Each escape's pattern and its kind of text (None if typed; see `template.py`).
_ESCAPES: dict[str, tuple[str, str | None]] = {
    # application name, user, database, backend type, command tag: free text
    **dict.fromkeys("audbi", (ANY, TEXT_ANY)),
    # remote host (with its port, or not)
    **dict.fromkeys("rh", (r"\S*?", TEXT_WORD)),
    # times: with milliseconds, without, the process's start
    **dict.fromkeys("mts", (_ZONED, TEXT_STAMP)),
    # process id, line number, transaction id
    **dict.fromkeys("plx", (INT, None)),
    "c": (r"[0-9a-f]{1,16}\.[0-9a-f]{1,16}", None),
    "P": (r"\d{0,20}", None),
    "n": (NUMBER, None),
    "e": (r"[0-9A-Z]{5}", None),
    "v": (rf"(?:{INT}/{INT})?", None),
    "Q": (rf"-?{INT}", None),
}
_GROUP_NAME = re.compile(r"\(\?P<(\w+)>")
_WITHOUT_Q = "_without_q"
_SEVERITY = r"(?P<severity>[A-Z]{1,10}[1-5]?):  (?:[0-9A-Z]{5}: )?(?P<message>.*)"

_DURATION = re.compile(rf"duration: ({NUMBER}) ms(?:  (.*))?", re.DOTALL)
_EXECUTE = re.compile(r"execute [^:]*: (.*)", re.DOTALL)
_SKIPPED = re.compile(r"(?:parse|bind) [^:]*: |plan:")
_ZONED_TIME = re.compile(rf"({_DATE_TIME}(?:\.\d+)?) (\S+)")

# A key starts where no other key character is before it, so each is tried once.
_SQLCOMMENTER = re.compile(r"\s*(?<![^=,'\s])([^=,'\s]++)='((?:[^'\\]|\\.)*+)'\s*(?:,|$)")
_TAG_KEYS = ("pp_run", "pp_users", "pp_rate", "pp_req")
_TAG_VALUE = re.compile(r"[A-Za-z0-9_.-]*")

# csvlog columns (0-based) that pinchpoint reads; application_name from PostgreSQL 9.0.
_CSV_LOG_TIME, _CSV_SEVERITY, _CSV_MESSAGE, _CSV_APPLICATION = 0, 11, 13, 22
_CSV_MAX_LINES = 1000
_RECORD_START = re.compile(r"\d{4}-\d{2}-\d{2} ")


def _comments(statement: str) -> list[str]:
    """The texts of a statement's `/* ... */` comments, found in one pass."""
    comments: list[str] = []
    at = statement.find("/*")
    while at >= 0:
        close = statement.find("*/", at + 2)
        if close < 0:
            break  # no comment closes after this point
        comments.append(statement[at + 2 : close])
        at = statement.find("/*", close + 2)
    return comments


def comment_tag(statement: str) -> str | None:
    """The tag of a statement's comment as a query string (`pp_run=r1&pp_users=4&pp_req=17`),
    or None when no comment holds a valid one."""
    if "pp_run" not in statement:
        return None
    for comment in _comments(statement):
        if "pp_run" not in comment:
            continue
        if "='" not in comment:
            text = comment.strip()  # a query string in the comment
        else:
            fields: dict[str, str] = {}
            for key, value in _SQLCOMMENTER.findall(comment):
                key = unquote(key)
                if key in _TAG_KEYS:
                    fields.setdefault(key, unquote(value.replace("\\'", "'")))
            if not all(_TAG_VALUE.fullmatch(value) for value in fields.values()):
                continue  # a damaged tag is no tag
            text = "&".join(f"{key}={fields[key]}" for key in _TAG_KEYS if key in fields)
        if find_tag(text) is not None:
            return text
    return None


def _timestamp(text: str | None) -> float | None:
    if not text:
        return None
    match = _ZONED_TIME.fullmatch(text)
    if match is None:
        return None
    try:
        when = datetime.fromisoformat(match.group(1))
    except ValueError:
        return None
    return zoned_timestamp(when, match.group(2))


def duration_record(message: str, application_name: str | None, ts: float | None) -> Record | None:
    """The record of a `duration: ...` LOG message, NOT_A_RECORD for any other message,
    None for a duration that does not read."""
    match = _DURATION.fullmatch(message)
    if match is None:
        return None if message.startswith("duration:") else NOT_A_RECORD
    millis, rest = match.groups()
    statement = ""
    if rest:
        if _SKIPPED.match(rest):
            return NOT_A_RECORD
        if rest.startswith("statement: "):
            statement = rest[len("statement: ") :]
        elif (execute := _EXECUTE.fullmatch(rest)) is not None:
            statement = execute.group(1)
    seconds = duration(scaled(millis, -3))
    if seconds is None:
        return None
    tag = comment_tag(statement)
    app = application_name if application_name not in (None, "", "[unknown]") else None
    return Record(
        duration_s=seconds,
        ts=ts,
        target=tag if tag is not None else (app or ""),
        tag_header=app,
    )


@dataclass(frozen=True)
class StderrParser(FormatParser):
    """Lines of the stderr log, after a log_line_prefix."""

    log_format: str
    regex: re.Pattern[str]
    groups: dict[str, str]  # escape letter -> its group name

    def read(self, line: str) -> Record | None:
        if line.startswith("\t"):
            return NOT_A_RECORD  # continuation of a message written over several lines
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        found = _values(match)
        if found["severity"] != "LOG":
            return NOT_A_RECORD
        values = {letter: found.get(group) for letter, group in self.groups.items()}
        ts = to_float(values.get("n"))
        if ts is None:
            ts = _timestamp(values.get("m")) or _timestamp(values.get("t"))
        app = values.get("a")
        return duration_record(found["message"], app.strip() if app else None, ts)


def _field(match: re.Match[str], _quoted: bool) -> Field | str:
    padding, letter = match.groups()
    if letter == "%":
        return "%"
    escape = _ESCAPES.get(letter)
    if escape is None:
        return ""  # PostgreSQL writes nothing for an unknown escape (nor for a second %q)
    pattern, kind = escape
    if padding not in ("", "-"):
        pattern = f" *{pattern}" if not padding.startswith("-") else f"{pattern} *"
    return Field(letter, pattern, kind)


def compile_prefix(prefix: str) -> StderrParser:
    """Compile a `log_line_prefix` into a parser of stderr log lines."""
    # What follows the first %q is written only by session processes.
    q = next((m for m in _ESCAPE.finditer(prefix) if m.group(2) == "q"), None)
    head, tail = (prefix, None) if q is None else (prefix[: q.start()], prefix[q.end() :])
    groups: dict[str, str] = {}
    before = Template()
    add_fields(before, head, _ESCAPE, _field, "e_{key}", groups)
    after = None
    if tail is not None:
        after = Template()
        add_fields(after, tail, _ESCAPE, _field, "e_{key}", groups)
    regex = re.compile(_prefix_regex(before, after), re.DOTALL)
    return StderrParser(prefix, regex, groups)


def _prefix_regex(before: Template, after: Template | None) -> str:
    """The regex of a prefix, then the severity and message. What follows %q (`after`) is
    tried first, then left out, as `(?:after)?` would; the groups of the second way are
    named with _WITHOUT_Q after their names."""
    if after is None:
        return before.regex(_SEVERITY)
    tail = _SEVERITY + r"\Z"
    groups = before.groups()
    head = "".join(f"(?>{group})" for group in groups[:-1])
    last = groups[-1] if groups else ""
    with_after = (f"(?>{last})" if last else "") + atomic(after.groups(), tail)
    without = _GROUP_NAME.sub(rf"(?P<\1{_WITHOUT_Q}>", f"(?>{last}{tail})")
    return f"{head}(?:{with_after}|{without})"


def _values(match: re.Match[str]) -> dict[str, str]:
    """The groups that matched, by name (without _WITHOUT_Q)."""
    return {
        name.removesuffix(_WITHOUT_Q): value
        for name, value in match.groupdict().items()
        if value is not None
    }


@dataclass
class CsvlogParser(FormatParser):
    """Lines of the csvlog. A record whose quoted fields hold line breaks spans several
    lines: its earlier lines give NOT_A_RECORD and its last line gives the record. A record
    whose lines hold more than MAX_LINE_CHARS in all does not parse."""

    log_format: str = CSVLOG
    _pending: list[str] = field(default_factory=list, repr=False)
    _pending_chars: int = field(default=0, repr=False)
    # Whether the pending lines leave a quoted field open (an odd number of quotes).
    _open: bool = field(default=False, repr=False)

    def refused(self) -> None:
        self._pending = []

    def read(self, line: str) -> Record | None:
        if _RECORD_START.match(line):
            self._pending, self._pending_chars, self._open = [], 0, False  # a record starts
        elif not self._pending or len(self._pending) >= _CSV_MAX_LINES:
            self._pending = []
            return None
        self._pending.append(line)
        self._pending_chars += len(line) + 1
        self._open ^= line.count('"') % 2 == 1
        if self._pending_chars > MAX_LINE_CHARS + 1:
            self._pending = []
            return None
        if self._open:
            return NOT_A_RECORD  # a quoted field goes on on the next line
        text = "\n".join(self._pending)
        self._pending = []
        try:
            row = next(csv.reader([text], strict=True))
        except (csv.Error, StopIteration):
            return None
        if len(row) <= _CSV_APPLICATION:
            return None
        if row[_CSV_SEVERITY] != "LOG":
            return NOT_A_RECORD
        return duration_record(
            row[_CSV_MESSAGE], row[_CSV_APPLICATION], _timestamp(row[_CSV_LOG_TIME])
        )


@dataclass(frozen=True)
class JsonlogParser(FormatParser):
    """Lines of the jsonlog (PostgreSQL 15+)."""

    log_format: str = JSONLOG

    def read(self, line: str) -> Record | None:
        data = json_object(line)
        if data is None or not isinstance(data.get("error_severity"), str):
            return None
        message, app, ts = data.get("message"), data.get("application_name"), data.get("timestamp")
        if data["error_severity"] != "LOG":
            return NOT_A_RECORD
        if not isinstance(message, str):
            return None
        return duration_record(
            message,
            app if isinstance(app, str) else None,
            _timestamp(ts) if isinstance(ts, str) else None,
        )


def parser_for(log_format: str | None) -> StderrParser | CsvlogParser | JsonlogParser:
    """`csvlog`, `jsonlog`, or a log_line_prefix (default POSTGRESQL_PREFIX)."""
    if log_format is None:
        return compile_prefix(POSTGRESQL_PREFIX)
    if log_format.strip().lower() == CSVLOG:
        return CsvlogParser()
    if log_format.strip().lower() == JSONLOG:
        return JsonlogParser()
    if "\n" in log_format:
        raise FormatError(f"a log_line_prefix holds no line break: {log_format!r}")
    return compile_prefix(log_format)
