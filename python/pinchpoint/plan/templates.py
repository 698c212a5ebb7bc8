"""Templates of flows: `${name}` in a path, a header value, a body or an expected value
is replaced by the variable's value when the request is sent; `$${` stands for a literal
`${`. A list variable (a capture with `pick = "all"`) gives its values as `${name[0]}`,
`${name[-1]}` (from the end) and, in a step with `foreach`, `${name[i]}`. Read here as the
engine reads them (`flow/template.rs`), so that a template the plan accepts is one the
engine accepts."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Built in to every flow: the user's index and its walks so far.
BUILTIN_VARS = ("user_index", "iteration")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ELEMENT = re.compile(r"([^\[]*)\[(i|-?[0-9]+)\]")
_I64 = 2**63

# What the engine trims around a name (Unicode White_Space, as Rust's `str::trim`); not
# Python's `str.strip()`, which also trims the separators U+001C to U+001F.
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
_SPACE += "\u2028\u2029\u202f\u205f\u3000"


def is_name(text: str) -> bool:
    """A variable's name: letters, digits and _, not starting with a digit."""
    return bool(_NAME.match(text))


def element(name: str) -> tuple[str, str] | None:
    """`name[0]`, `name[-1]` or `name[i]` as (list, index as written); None for any
    other name."""
    found = _ELEMENT.fullmatch(name)
    if found is None:
        return None
    index = found.group(2)
    if index != "i" and not -_I64 <= int(index) < _I64:
        return None
    return found.group(1), index


@dataclass(frozen=True)
class Scan:
    """The variable names a template uses, in order, and why it cannot be read (None:
    it can): a `${` without its `}`."""

    names: list[str]
    error: str | None


def scan(text: str) -> Scan:
    names: list[str] = []
    rest = text
    while (at := rest.find("${")) >= 0:
        if rest[:at].endswith("$"):
            rest = rest[at + 2 :]
            continue
        after = rest[at + 2 :]
        end = after.find("}")
        if end < 0:
            column = len(text) - len(rest) + at + 1
            return Scan(names, f"`${{` at character {column} has no closing `}}`")
        names.append(after[:end].strip(_SPACE))
        rest = after[end + 1 :]
    return Scan(names, None)
