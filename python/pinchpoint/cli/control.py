"""`pinchpoint control URL --users N`: a running run's users changed from the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.terminal import fail


@app.command()
def control(
    url: Annotated[
        str,
        typer.Argument(help="The live page's address the run printed (with its ?token=)."),
    ],
    users: Annotated[
        int,
        typer.Option("--users", min=1, help="Users from now on, in a step of their own."),
    ],
    token: Annotated[
        str | None,
        typer.Option("--token", help="The run's token, when the address has none."),
    ] = None,
) -> None:
    """Change the users of a run served with --serve while it goes: a new step from now
    until the run's planned end (or the next change)."""
    from pinchpoint.outputs.control_client import ControlRefused, ask_users

    try:
        change = ask_users(url, users, token)
    except ControlRefused as e:
        fail(e)
        raise typer.Exit(1) from None
    typer.echo(f"Users set to {change['users']} (change {change['change']})")
