"""The command's terminal: consoles made on first use, one-line errors, and the SLA's
outcome of a run printed (and as JSON)."""

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


def sla_json(results: list | None) -> dict | None:
    from pinchpoint.analyze.sla import broken

    if results is None:
        return None
    return {"passed": not broken(results), "results": [r.to_dict() for r in results]}


def sla_outcome(objectives: Any, outcome: Any, console: RichConsole, as_json: bool) -> bool:
    """Check the plan's [sla] on the run, print it (and the JSON); False when broken."""
    import json

    from pinchpoint.analyze.sla import broken, check_sla
    from pinchpoint.report.sla_table import render_sla

    results = None
    met = True
    if objectives is not None and not objectives.is_empty():
        try:
            results = check_sla(objectives, outcome.run_dir)
        except FileNotFoundError as e:
            fail(f"The SLA was not checked: {e}")
            met = False
        else:
            console.print()
            render_sla(results, console)
            met = not broken(results)
    if as_json:
        document = {
            "run_dir": str(outcome.run_dir),
            "interrupted": outcome.interrupted,
            "verdict": outcome.verdict,
            "sla": sla_json(results),
        }
        print(json.dumps(document, indent=2))
    return met
