"""Node.js's pool: each process is one event loop serving any number of requests at once,
so no fixed pool of slots. A cluster master (`node:cluster`) forks the workers that serve:
its processes are its children; a single process serves alone."""

from __future__ import annotations

import os
from collections.abc import Sequence

from pinchpoint.collect.servers.pool import ASYNC, Pool, ServerProcess

_NAMES = ("node", "nodejs")


def is_node(argv: Sequence[str]) -> bool:
    """Whether the command line is Node.js's (`node app.js`, `/usr/bin/nodejs server.js`)."""
    return bool(argv) and os.path.basename(argv[0]) in _NAMES


def read(process: ServerProcess, cores: int, files: bool) -> Pool:
    """The pool of the Node.js whose first process is `process`."""
    if process.children:
        source = f"an event loop in each of its {process.children} worker processes counted"
        return Pool("node", ASYNC, process.children, 1, source)
    return Pool("node", ASYNC, 1, 1, "one process, one event loop")
