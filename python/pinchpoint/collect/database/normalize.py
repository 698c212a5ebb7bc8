"""A statement as the verdict names it: its comments out (the run's tag among them), its
literals and parameters each replaced by a numbered placeholder ($1, $2, ... as
pg_stat_statements writes them), its spaces collapsed.

    UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n /*pp_run='r1',pp_req='7'*/
    → UPDATE counters SET n = n + $1 WHERE id = $2 RETURNING n

The values a statement carries never reach the run folder: a literal may be a secret.
Quoted identifiers ("Order") stay as written.
"""

from __future__ import annotations

import re

# The longest statement kept, in characters (PostgreSQL truncates at 1 KiB by default).
MAX_CHARS = 2000

# A literal: a string (E'', B'', X'', U&'' prefixes), a dollar-quoted string, a number
# not inside a name, or a parameter ($1).
_STRING = re.compile(r"(?:[EeBbXxNn]|[Uu]&)?'(?:[^']|'')*'?")
_ESCAPED = re.compile(r"[Ee]'(?:[^'\\]|\\.|'')*'?", re.DOTALL)
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_PARAMETER = re.compile(r"\$\d+")
_NAME = re.compile(r"[A-Za-z_\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*")
_IDENTIFIER = re.compile(r'"(?:[^"]|"")*"?')
_SPACE = re.compile(r"\s+")


def normalize(sql: str) -> str:
    """The statement with its comments out and its literals as $1, $2, ..."""
    out: list[str] = []
    count = 0
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
            continue
        if sql.startswith("/*", i):
            i = _comment_end(sql, i)
            out.append(" ")
            continue
        literal = _literal(sql, i)
        if literal is not None:
            count += 1
            out.append(f"${count}")
            i = literal
            continue
        match = _NAME.match(sql, i) or _IDENTIFIER.match(sql, i)
        if match is not None and match.end() > i:
            out.append(match.group())
            i = match.end()
            continue
        out.append(c)
        i += 1
    return _SPACE.sub(" ", "".join(out)).strip()[:MAX_CHARS]


def _literal(sql: str, i: int) -> int | None:
    """Where the literal that starts at `i` ends; None when none starts there."""
    escaped = _ESCAPED.match(sql, i) if sql[i] in "Ee" else None
    if escaped is not None:
        return escaped.end()
    for pattern in (_STRING, _PARAMETER, _NUMBER):
        match = pattern.match(sql, i)
        if match is not None and match.end() > i:
            return match.end()
    dollar = _DOLLAR.match(sql, i)
    if dollar is not None:
        tag = dollar.group()
        close = sql.find(tag, dollar.end())
        return len(sql) if close < 0 else close + len(tag)
    return None


def _comment_end(sql: str, i: int) -> int:
    """Where the `/* */` comment that starts at `i` ends (PostgreSQL's nest)."""
    depth, n = 0, len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n
