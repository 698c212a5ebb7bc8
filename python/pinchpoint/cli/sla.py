"""`pinchpoint sla RUN`: a finished run checked against an SLA."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import Console, fail, sla_json

if TYPE_CHECKING:
    pass


@app.command()
def sla(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="The run folder (runs/<run id>) to check.", exists=True, file_okay=False
        ),
    ],
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Take the SLA table from this plan, not from the run's plan.toml.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Check a run folder against its plan's SLA table: exits 1 when an objective is broken."""
    import json

    from pinchpoint.analyze.sla import broken, check_sla
    from pinchpoint.plan.model import read_plan_text
    from pinchpoint.plan.sla import sla_of_plan_text
    from pinchpoint.report.sla_table import render_sla

    source = plan_file or run_dir / files.PLAN
    try:
        objectives = sla_of_plan_text(read_plan_text(source), str(source))
        if objectives is None or objectives.is_empty():
            raise ValueError(f"{source}: no [sla] table to check")
        results = check_sla(objectives, run_dir)
    except (OSError, ValueError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), "sla": sla_json(results)}, indent=2))
    else:
        render_sla(results, Console())
    if broken(results):
        raise typer.Exit(1)
