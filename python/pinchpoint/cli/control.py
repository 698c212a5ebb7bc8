"""`pinchpoint control URL --users N` or `--rate R`: a running run's users (closed loop)
or arrival rate (open loop) changed from the terminal."""

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
        int | None,
        typer.Option("--users", min=1, help="Users from now on, in a step of their own."),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate", help="Open loop: requests per second from now on, in a phase of its own."
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", help="The run's token, when the address has none."),
    ] = None,
) -> None:
    """Change the users (or, open loop, the rate) of a run served with --serve while it
    goes: a new step from now until the run's planned end (or the next change)."""
    from pinchpoint.outputs.control_client import ControlRefused, ask_rate, ask_users

    if (users is None) == (rate is None):
        fail("give one of --users (closed loop) or --rate (open loop)")
        raise typer.Exit(2)
    try:
        if rate is not None:
            change = ask_rate(url, rate, token)
        else:
            change = ask_users(url, users or 0, token)
    except ControlRefused as e:
        fail(e)
        raise typer.Exit(1) from None
    if rate is not None:
        typer.echo(f"Rate set to {change['rate']:g}/s (change {change['change']})")
    else:
        typer.echo(f"Users set to {change['users']} (change {change['change']})")
