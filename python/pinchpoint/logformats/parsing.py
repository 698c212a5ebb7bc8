"""The skeleton every format's parser shares: a line past the length limit is refused
before the format reads anything of it; the format reads the rest (`FormatParser`).

JSON formats split a line into its object the same way (`json_object`).
"""

import json
from abc import ABC, abstractmethod
from typing import Any, TypeVar

from pinchpoint.logformats.base import FormatError, LineParser, Record, too_long

_Parser = TypeVar("_Parser", bound=LineParser)


class FormatParser(ABC):
    """A LineParser: `parse` refuses a line longer than MAX_LINE_CHARS (it does not parse),
    and gives any other to the format's `read`."""

    @property
    def gives_duration(self) -> bool:
        return True

    def parse(self, line: str) -> Record | None:
        """The record of one line (without its newline), NOT_A_RECORD for a line in the
        format that holds none, or None if the line does not parse."""
        if too_long(line):
            self.refused()
            return None
        return self.read(line)

    @abstractmethod
    def read(self, line: str) -> Record | None:
        """`parse` for a line within the length limit."""

    def refused(self) -> None:  # noqa: B027 (a hook: most formats keep nothing)
        """Called for a line too long to be read; a format that keeps lines (a record over
        several) drops them here."""


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object `text` holds, or None if it holds something else or no JSON."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays nested too deep
        return None
    return data if isinstance(data, dict) else None


def after_prefix(line: str) -> dict[str, Any] | None:
    """The JSON object of a line, the text before its first `{` (a logging prefix) left
    out; None if there is none."""
    start = line.find("{")
    return None if start < 0 else json_object(line[start:])


def with_duration(parser: _Parser, missing: str) -> _Parser:
    """`parser` if its format gives a duration; else FormatError(`missing`)."""
    if not parser.gives_duration:
        raise FormatError(missing)
    return parser
