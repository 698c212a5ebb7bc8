"""The command's terminal: consoles made on first use, one-line errors, and the SLA's
outcome of a run (kept in its verdict by the analysis) printed (and as JSON)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console as RichConsole


def Console(stderr: bool = False) -> RichConsole:
    """rich's Console, imported on first use (rich costs start-up time --help need not pay)."""
    from rich.console import Console as RichConsole

    return RichConsole(stderr=stderr)


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


def sla_outcome(outcome: Any, console: RichConsole, as_json: bool) -> bool:
    """The SLA's outcome the analysis kept in the run's verdict, printed (and the JSON);
    False when it is broken or could not be checked."""
    import json

    from pinchpoint.analyze.sla_record import stored_sla
    from pinchpoint.report.sla_table import render_sla

    kept = stored_sla(outcome.verdict)
    if kept is not None and kept.problem is not None:
        fail(f"The SLA was not checked: {kept.problem}")
    elif kept is not None:
        console.print()
        render_sla(kept.results, console)
    if as_json:
        document = {
            "run_dir": str(outcome.run_dir),
            "interrupted": outcome.interrupted,
            "verdict": outcome.verdict,
            "sla": kept.to_json() if kept is not None else None,
        }
        print(json.dumps(document, indent=2))
    return kept is None or kept.passed
