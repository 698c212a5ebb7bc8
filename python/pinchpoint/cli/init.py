"""`pinchpoint init URL`: a plan written from the stack that serves the URL on this host."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import fail, warn


@app.command()
def init(
    url: Annotated[str, typer.Argument(help="The URL to load, served on this host.")],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="Where to write the plan (not overwritten).")
    ] = Path(files.PLAN),
    method: Annotated[
        str,
        typer.Option(
            "-X", "--method", help="The request's method; init sends one before reading sockets."
        ),
    ] = "GET",
) -> None:
    """Write a plan by following the URL's request through the processes that serve it:
    each tier's logs, formats, pid files and calls, from their own configs."""
    from pinchpoint.discover.init import write_plan

    try:
        found = write_plan(url, out, method.upper())
    except FileExistsError:
        fail(f"{out} exists: give another file with -o")
        raise typer.Exit(2) from None
    if not found.tiers:
        typer.echo(f"Wrote {out} with the target only: {'; '.join(found.problems)}")
        return
    for problem in found.problems:
        warn(problem)
    for tier in found.tiers:
        for warning in tier.warnings:
            warn(f"{tier.name}: {warning}")
    typer.echo(f"Wrote {out}: {' → '.join(t.name for t in found.tiers)}")
