"""hypercorn's pool from its command line: `--workers N` (`-w N`, one by default) processes,
each an event loop serving any number of requests at once; no fixed pool of slots. Its
config file (`-c`) is not read: a count set only there is its processes counted."""

from __future__ import annotations

from collections.abc import Sequence

from pinchpoint.collect.servers.argv import count, option, runs
from pinchpoint.collect.servers.pool import ASYNC, Pool, ServerProcess


def is_hypercorn(argv: Sequence[str]) -> bool:
    return runs(argv, "hypercorn")


def read(process: ServerProcess, cores: int, files: bool = True) -> Pool:
    """The pool of the hypercorn whose main process is `process`."""
    workers = count(option(process.argv, ("--workers",), ("-w",)), cores)
    if workers is not None:
        return Pool("hypercorn", ASYNC, workers, 1, "command line")
    if process.children:
        return Pool("hypercorn", ASYNC, process.children, 1, "its worker processes counted")
    return Pool("hypercorn", ASYNC, 1, 1, "hypercorn's default of one process")
