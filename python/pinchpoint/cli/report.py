"""`pinchpoint report RUN`: the report of a run folder written again from its verdict,
without analyzing it again (the last stage, runnable alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import Console, fail


@app.command()
def report(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="The run folder (runs/<run id>) whose verdict.json to render.",
            exists=True,
            file_okay=False,
        ),
    ],
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Write report.html only; print nothing.")
    ] = False,
) -> None:
    """Write a run folder's report.html from its verdict.json (and print the verdict)."""
    from pinchpoint.rundir.view import RunView

    view = RunView(run_dir)
    if not view.has(files.VERDICT):
        fail(f"{run_dir}: no verdict.json: run pinchpoint analyze {run_dir} first")
        raise typer.Exit(2)
    from pinchpoint.report.html import write_report
    from pinchpoint.terminal.verdict import render_steps, render_verdict

    try:
        out = write_report(view)
        verdict = view.verdict
    except (OSError, ValueError) as e:
        fail(f"{run_dir}: cannot be reported: {' '.join(str(e).split())}")
        raise typer.Exit(2) from None
    if quiet:
        return
    console = Console()
    render_steps(verdict, console)
    render_verdict(verdict, console)
    console.print(f"\nreport: {out}")
