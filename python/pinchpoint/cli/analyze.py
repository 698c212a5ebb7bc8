"""`pinchpoint analyze RUN`: a run folder's verdict and report computed again."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import Console, fail, warn

if TYPE_CHECKING:
    pass


@app.command()
def analyze(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="The run folder (runs/<run id>) to analyze again.", exists=True, file_okay=False
        ),
    ],
) -> None:
    """Recompute a run folder's verdict and report from what it holds."""
    from pinchpoint.rundir.view import RunView

    if not RunView(run_dir).is_run_folder():
        fail(f"{run_dir}: not a run folder: it holds none of {', '.join(files.MARKERS)}")
        raise typer.Exit(2)
    from pinchpoint.analyze import analyze as analyze_run
    from pinchpoint.pipeline.recover import recover
    from pinchpoint.report.html import write_report
    from pinchpoint.terminal.verdict import render_steps, render_verdict

    try:
        recovery = recover(run_dir)  # a folder left by a killed run
        view = RunView(run_dir)  # read after the recovery wrote what the folder lacked
        verdict = analyze_run(view)
        write_report(view)
    except (OSError, ValueError) as e:
        # A file of the folder missing or unreadable (json and parquet errors are ValueErrors).
        fail(f"{run_dir}: cannot be analyzed: {' '.join(str(e).split())}")
        raise typer.Exit(2) from None
    console = Console()
    if recovery.partial:
        warn(recovery.line(), console)
    render_steps(verdict, console)
    render_verdict(verdict, console)
