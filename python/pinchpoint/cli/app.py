"""The `pinchpoint` command's application object and what its commands share: the
options several take, and how a run's outcome is shown. Each command is a module of this
package that parses its options and calls the library."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.rundir import files

if TYPE_CHECKING:
    from rich.console import Console as RichConsole

    from pinchpoint.pipeline import RunOutcome

HELP = "The `pinchpoint` command: a thin layer over the pipeline."

# Plain help (rich_markup_mode=None): typer's rich help imports ~0.2 s of markdown and
# traceback rendering before printing a line.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help=HELP,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


RunsDir = Annotated[Path, typer.Option("--runs-dir", help="Where run folders are written.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No live view of the run.")]
FindKnee = Annotated[
    bool,
    typer.Option(
        "--find-knee",
        help="Double the users from lower until throughput stops scaling, bisect, stop "
        "(load.find_knee).",
    ),
]


# A folder holding none of these is not a run folder.


def show_outcome(outcome: RunOutcome, console: RichConsole) -> None:
    from pinchpoint.terminal.verdict import render_steps, render_verdict

    console.print()
    if search := getattr(outcome, "search", None):
        console.print(f"Find knee: {search['summary']}", highlight=False)
    render_steps(outcome.verdict, console)
    render_verdict(outcome.verdict, console)
    if outcome.interrupted:
        console.print("[yellow]The run was interrupted: the results cover the steps it ran.[/]")
    for warning in getattr(outcome, "warnings", []):
        console.print(f"[yellow]Not collected: {warning}[/]", highlight=False)
    console.print(f"\nRun folder: {outcome.run_dir}   report: {outcome.run_dir / files.REPORT}")
