"""`pinchpoint init URL`: a plan written from the stack that serves the URL, on this host and
on the hosts of the agents given."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.rundir import files
from pinchpoint.terminal import fail, warn


@app.command()
def init(
    url: Annotated[str, typer.Argument(help="The URL to load.")],
    out: Annotated[
        Path, typer.Option("-o", "--out", help="Where to write the plan (not overwritten).")
    ] = Path(files.PLAN),
    method: Annotated[
        str,
        typer.Option(
            "-X", "--method", help="The request's method; init sends one before reading sockets."
        ),
    ] = "GET",
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            help="NAME=URL of a `pinchpoint agent` (with [agent] discover set) on another host "
            "of the stack; repeat for each.",
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option("--token-env", help="The environment variable holding the agents' token."),
    ] = None,
) -> None:
    """Write a plan by following the URL's request through the processes that serve it:
    each tier's logs, formats, pid files and calls, from their own configs."""
    from pinchpoint.discover.init import agent_file, agents_from, write_plan
    from pinchpoint.plan.user_paths import check_output_file

    try:
        check_output_file(out, "-o/--out")
        agents = agents_from(agent or [], token_env)
        found = write_plan(url, out, method.upper(), agents)
    except FileExistsError as e:
        fail(f"{e.filename or e.args[0]} exists: give another file with -o")
        raise typer.Exit(2) from None
    except ValueError as e:
        fail(str(e))
        raise typer.Exit(2) from None
    if not found.tiers:
        typer.echo(f"Wrote {out} with the target only: {'; '.join(found.problems)}")
        return
    for problem in found.problems:
        warn(problem)
    for tier in found.tiers:
        for warning in tier.warnings:
            warn(f"{tier.name}: {warning}")
    path = " → ".join(f"{t.name}@{t.host}" if t.host else t.name for t in found.tiers)
    typer.echo(f"Wrote {out}: {path}")
    for name in sorted({t.host for t in found.tiers if t.host}):
        typer.echo(
            f"Wrote {agent_file(out, name)}: add its components to agent {name}'s config, "
            "then restart the agent"
        )
