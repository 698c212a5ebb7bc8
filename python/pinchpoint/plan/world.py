"""What a plan needs of the host it runs on, checked before anything starts: the folder
runs are written to can be written, and the target's host resolves. Each failure is a
PlanError of one line naming the file, line and field (or the flag). The command line
checks its flags with these without loading the engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.user_paths import NotUsable, check_output_file, not_regular

if TYPE_CHECKING:
    from pinchpoint.plan.model import Plan

# How long a name lookup may take before the host counts as unresolvable.
RESOLVE_TIMEOUT_S = 5.0


def check_folder(path: Path, flag: str) -> None:
    """`path` is a folder that can be written, or can be made in one that can."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        kind = not_regular(existing.stat().st_mode) or "a file"
        where = f"is {kind}" if existing == path else f"is under {existing}, {kind}"
        raise PlanError(f"{flag} {path}: {where}, not a folder")
    if existing.exists() and not os.access(existing, os.W_OK | os.X_OK):
        raise PlanError(f"{flag} {path}: {existing} cannot be written to")


def check_output(path: Path, flag: str) -> None:
    """`path` is a regular file that can be written, or a new one in a folder that
    exists and can be written (a FIFO would block the run, a device fail it)."""
    try:
        check_output_file(path, flag)
    except NotUsable as e:
        raise PlanError(str(e)) from None


def check_resolves(host: str, port: int, where: str) -> None:
    """The host name resolves within RESOLVE_TIMEOUT_S; `where` prefixes the error."""
    import socket
    import threading

    outcome: list[BaseException | None] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as e:
            outcome.append(e)
        else:
            outcome.append(None)

    # getaddrinfo has no timeout of its own; a daemon thread is left behind if it hangs.
    thread = threading.Thread(target=lookup, name="resolve", daemon=True)
    thread.start()
    thread.join(RESOLVE_TIMEOUT_S)
    if not outcome:
        raise PlanError(f"{where}: {host!r} did not resolve within {RESOLVE_TIMEOUT_S:g}s")
    error = outcome[0]
    if error is not None:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        raise PlanError(f"{where}: host {host!r} does not resolve: {reason}")


def check_plan_target(plan: Plan, text: str, source: str) -> None:
    """The plan's target host resolves (errors point at target.url in `source`)."""
    from pinchpoint.plan.toml import field_line

    target = plan.target
    line = field_line(text, ("target", "url"))
    where = f"{source}:{line}: target.url" if line else f"{source}: target.url"
    check_resolves(target.host, target.port, where)
