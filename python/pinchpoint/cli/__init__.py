"""The `pinchpoint` command: one module per command, each parsing its options and calling
the library. The heavy stages (the plan, the pipeline, the engine) are imported by each
command as it runs, so --help and a plan's error print at once."""

from __future__ import annotations

import gc
import os
import sys

import typer

from pinchpoint.cli import (  # noqa: F401  (each registers its command)
    agent,
    analyze,
    compare,
    control,
    demo,
    importer,
    init,
    load,
    report,
    run,
    sla,
)
from pinchpoint.cli.app import app
from pinchpoint.terminal import fail

__all__ = ["app", "main"]


def main() -> None:
    """The command, with every usage error on one line and no traceback for the user
    (PINCHPOINT_TRACEBACK=1 shows an unexpected error's)."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as e:
        e.show()
        code = e.exit_code
    except ClickException as e:
        ctx = getattr(e, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        fail(f"{where}{' '.join(e.format_message().split())}")
        code = e.exit_code
    except typer.Abort:
        # Ctrl-C outside a run's own handling (see interrupts.py), or the end of input.
        fail("Aborted.")
        code = 130
    except Exception as e:
        if os.environ.get("PINCHPOINT_TRACEBACK"):
            raise
        fail(f"pinchpoint: unexpected error: {type(e).__name__}: {' '.join(str(e).split())}")
        code = 1
    # What the command made is still tracked by the collector, and the interpreter's last
    # collection at exit would walk all of it (~70 ms of CPU after a load); the exit frees
    # the memory anyway, and every file was closed by the command.
    gc.freeze()
    sys.exit(code if isinstance(code, int) else 0)
