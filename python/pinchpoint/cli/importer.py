"""`pinchpoint import`: another tool's results as a run folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import RunsDir, app
from pinchpoint.terminal import Console, fail

if TYPE_CHECKING:
    pass


@app.command("import")
def import_(
    path: Annotated[
        Path, typer.Argument(help="The other tool's result file (or Locust CSV prefix).")
    ],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="csv, vegeta, k6, locust, wrk2 or hdr[:unit].")
    ],
    runs_dir: RunsDir = Path("runs"),
) -> None:
    """Turn another load tool's results into a run folder that can be compared."""
    from pinchpoint.importers import ImportFormatError, import_results
    from pinchpoint.plan.world import check_folder

    try:
        check_folder(runs_dir, "--runs-dir")
        run_dir = import_results(path, fmt, runs_dir)
    except (ImportFormatError, ValueError, OSError) as e:
        fail(e)
        raise typer.Exit(2) from None
    Console().print(f"Imported {path} as {run_dir}", highlight=False)
