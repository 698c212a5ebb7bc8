"""gunicorn serving an app of the lab's instead of the demo's."""

from __future__ import annotations


def own_app(argv: list[str], app: str) -> list[str]:
    """The demo stack's gunicorn command line serving `app`, without --preload: each worker
    makes its own threads and connections, none forked from a preloaded app."""
    return [arg for arg in argv[:-1] if arg != "--preload"] + [app]
