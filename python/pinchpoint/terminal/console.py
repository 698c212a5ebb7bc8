"""The command's consoles, made on first use, and its one-line errors and notices."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console as RichConsole


def Console(stderr: bool = False) -> RichConsole:
    """rich's Console escaping control characters (`escaped`), imported on first use (rich
    costs start-up time --help need not pay)."""
    from pinchpoint.terminal.escaped import EscapingConsole

    return EscapingConsole(stderr=stderr)


@functools.cache
def err_console() -> RichConsole:
    return Console(stderr=True)


def fail(message: object) -> None:
    """An error on stderr, red, as one unwrapped line: file names and `[[tables]]` intact."""
    from rich.text import Text

    err_console().print(Text(str(message), style="red"), highlight=False, soft_wrap=True)


def warn(message: str, console: RichConsole | None = None) -> None:
    """A notice in yellow, one line, on `console` (default stderr)."""
    from rich.text import Text

    target = console if console is not None else err_console()
    target.print(Text(message, style="yellow"), highlight=False, soft_wrap=True)
