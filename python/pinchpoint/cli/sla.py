"""`pinchpoint sla RUN`: a finished run checked against an SLA."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import Console, fail

if TYPE_CHECKING:
    from pinchpoint.analyze.sla import SlaResult
    from pinchpoint.rundir.view import RunView


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
            help=(
                "Check the SLA table of this plan on the run's requests, instead of showing"
                " the run's own as its analysis checked it."
            ),
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Show a run folder's SLA as its analysis checked it (another plan's with --plan): exits 1
    when an objective is broken."""
    import json

    from pinchpoint.analyze.sla import broken
    from pinchpoint.analyze.sla_record import SlaOutcome
    from pinchpoint.report.sla_table import render_sla
    from pinchpoint.rundir.view import RunView

    view = RunView(run_dir)
    try:
        results = _checked(view, plan_file) if plan_file else _kept(view)
    except (OSError, ValueError, LookupError) as e:
        fail(e)
        raise typer.Exit(2) from None
    if as_json:
        document = {"run_dir": str(run_dir), "sla": SlaOutcome(results).to_json()}
        print(json.dumps(document, indent=2))
    else:
        render_sla(results, Console())
    if broken(results):
        raise typer.Exit(1)


def _kept(view: RunView) -> list[SlaResult]:
    """The results the analysis kept in verdict.json. Raises when there are none to show."""
    from pinchpoint.analyze.sla_record import ANALYZE_AGAIN, stored_sla

    if not view.has(files.VERDICT):
        raise FileNotFoundError(
            f"{view.path}: no verdict.json: run pinchpoint analyze {view.path} first, "
            "or give the SLA with --plan"
        )
    try:
        outcome = stored_sla(view.verdict)
    except LookupError:
        raise LookupError(f"{view.path}: {ANALYZE_AGAIN}, or give the SLA with --plan") from None
    if outcome is None:
        raise ValueError(f"{view.plan_path()}: no [sla] table to check")
    if outcome.problem is not None:
        raise ValueError(f"{view.path}: the SLA was not checked: {outcome.problem}")
    return outcome.results


def _checked(view: RunView, plan_file: Path) -> list[SlaResult]:
    """The SLA table of `plan_file` checked on the run's requests now."""
    from pinchpoint.analyze.sla import check_sla
    from pinchpoint.plan.model import read_plan_text
    from pinchpoint.plan.sla import sla_of_plan_text

    objectives = sla_of_plan_text(read_plan_text(plan_file), str(plan_file))
    if objectives is None or objectives.is_empty():
        raise ValueError(f"{plan_file}: no [sla] table to check")
    return check_sla(objectives, view)
