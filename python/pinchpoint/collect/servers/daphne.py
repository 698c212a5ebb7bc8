"""daphne's pool: one process, an event loop serving any number of requests at once (daphne
has no workers of its own; several run behind a proxy each as a server of its own)."""

from __future__ import annotations

from collections.abc import Sequence

from pinchpoint.collect.servers.argv import runs
from pinchpoint.collect.servers.pool import ASYNC, Pool, ServerProcess


def is_daphne(argv: Sequence[str]) -> bool:
    return runs(argv, "daphne")


def read(process: ServerProcess, cores: int, files: bool = True) -> Pool:
    """The pool of the daphne whose process is `process`."""
    return Pool("daphne", ASYNC, 1, 1, "daphne runs one process")
