"""A MySQL statement as the verdict names it: its comments out (the run's tag among them),
its literals and `?` placeholders each a numbered placeholder ($1, $2, ... as PostgreSQL's
are named), simple `quoted` names unquoted, its spaces collapsed.

    UPDATE `counters` SET n = n + 1 WHERE id = 'a' /*pp_run='r1',pp_req='7'*/
    → UPDATE counters SET n = n + $1 WHERE id = $2

performance_schema's digest text (`UPDATE `counters` SET `n` = `n` + ? WHERE ID = ?`) comes
out the same way, its spaces before `.`, `,` and `)` and after `.` and `(` closed up. The values a
statement carries never reach the run folder: a literal may be a secret. In MySQL a string
may be in double quotes too, and a backslash escapes the quote that follows it.
"""

from __future__ import annotations

import re

from pinchpoint.collect.database.normalize import MAX_CHARS

# A token: a string ('' or "", optionally _charset or N/X/B prefixed), a quoted name, a
# hexadecimal or decimal number not inside a name, a `?`, a name, or any other character.
_TOKEN = re.compile(
    r"""(?P<string>(?:_[A-Za-z0-9]+|[NnXxBb])?(?:'(?:[^'\\]|\\.|'')*'?|"(?:[^"\\]|\\.|"")*"?))
    |(?P<quoted>`(?:[^`]|``)*`?)
    |(?P<number>0[xX][0-9A-Fa-f]+|0[bB][01]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    |(?P<placeholder>\?)
    |(?P<name>[A-Za-z_$\x80-\uffff][A-Za-z0-9_$\x80-\uffff]*)
    |(?P<other>\S)""",
    re.VERBOSE | re.DOTALL,
)
_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NO_SPACE_BEFORE = {",", ")", ".", ";"}
_NO_SPACE_AFTER = {"(", "."}


def normalize_mysql(sql: str) -> str:
    """The statement with its comments out and its literals and placeholders as $1, $2, ..."""
    out: list[str] = []
    count = 0
    for kind, text, spaced in _tokens(_without_comments(sql)):
        if kind in ("string", "number", "placeholder"):
            count += 1
            text = f"${count}"
        elif kind == "quoted" and _SIMPLE_NAME.fullmatch(text[1:-1]):
            text = text[1:-1]
        if out and spaced and text not in _NO_SPACE_BEFORE and out[-1] not in _NO_SPACE_AFTER:
            out.append(" ")
        out.append(text)
    return "".join(out)[:MAX_CHARS]


def _tokens(sql: str) -> list[tuple[str, str, bool]]:
    """Each token's kind and text, and whether a space came before it."""
    found = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup
        assert kind is not None
        spaced = match.start() > 0 and sql[match.start() - 1].isspace()
        found.append((kind, match.group(), spaced))
    return found


def _without_comments(sql: str) -> str:
    """The statement with `/* */`, `# ...` and `-- ...` comments each one space; strings
    and quoted names kept whole (a `#` inside one is no comment)."""
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"`":
            end = _quote_end(sql, i)
            out.append(sql[i:end])
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif c == "#" or (sql.startswith("--", i) and (i + 2 == n or sql[i + 2].isspace())):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _quote_end(sql: str, i: int) -> int:
    """Where the string or quoted name that starts at `i` ends (past its closing quote)."""
    quote, j, n = sql[i], i + 1, len(sql)
    while j < n:
        if sql[j] == "\\" and quote != "`":
            j += 2
        elif sql[j] == quote:
            if j + 1 < n and sql[j + 1] == quote:
                j += 2
            else:
                return j + 1
        else:
            j += 1
    return n
