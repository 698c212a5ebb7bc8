"""The SLA's outcome of a run (kept in its verdict by the analysis), printed (and as JSON)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pinchpoint.terminal.console import fail

if TYPE_CHECKING:
    from rich.console import Console as RichConsole


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
