"""`pinchpoint agent`: the agent that collects on a remote host."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pinchpoint.cli.app import app
from pinchpoint.terminal import Console, fail

if TYPE_CHECKING:
    pass


@app.command()
def agent(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="The agent's config (TOML).", dir_okay=False)
    ],
    check: Annotated[
        bool, typer.Option("--check", help="Check the config and exit without serving.")
    ] = False,
) -> None:
    """Serve the logs and resource usage of this host's components to `pinchpoint run`."""
    from pinchpoint.agent import ConfigError, check_config, load_config, make_server, serve

    try:
        settings = load_config(config)
        if check:
            check_config(settings)
            Console().print(f"{config}: OK", highlight=False)
            return
        server = make_server(settings)
    except ConfigError as e:
        fail(e)
        raise typer.Exit(2) from None
    serve(server)
