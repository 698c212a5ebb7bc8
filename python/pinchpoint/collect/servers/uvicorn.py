"""uvicorn's settings as uvicorn settles them: its default of one process, then
`WEB_CONCURRENCY`, then `UVICORN_*` variables, then its command line, the later winning.
Its pool is an event loop in each process: with `--workers N` a supervisor and N worker
processes, each serving any number of requests at once, so no fixed pool of slots."""

from __future__ import annotations

from collections.abc import Sequence

from pinchpoint.collect.servers.argv import count, option, runs
from pinchpoint.collect.servers.pool import ASYNC, Pool, ServerProcess

# Its settings by name: the command line's option and the variable click reads it from.
_OPTIONS = {
    "workers": ("--workers", "UVICORN_WORKERS"),
    "uds": ("--uds", "UVICORN_UDS"),
    "host": ("--host", "UVICORN_HOST"),
    "port": ("--port", "UVICORN_PORT"),
}

Settings = dict[str, tuple[str, str]]


def is_uvicorn(argv: Sequence[str]) -> bool:
    """Whether the command line is uvicorn's (its script or `python -m uvicorn`)."""
    return runs(argv, "uvicorn")


def settings(process: ServerProcess) -> Settings:
    """The settings of the uvicorn whose main process is `process` that were given a value,
    each as (value, where it was read)."""
    found: Settings = {}
    if "WEB_CONCURRENCY" in process.environ:
        found["workers"] = (process.environ["WEB_CONCURRENCY"], "WEB_CONCURRENCY")
    for key, (flag, variable) in _OPTIONS.items():
        if variable in process.environ:
            found[key] = (process.environ[variable], variable)
        value = option(process.argv, (flag,))
        if value is not None:
            found[key] = (value, "command line")
    return found


def read(process: ServerProcess, cores: int, files: bool = True) -> Pool:
    """The pool of the uvicorn whose main process is `process`: an event loop in each of
    its processes (its workers, or itself alone)."""
    found = settings(process)
    given = found.get("workers")
    workers = count(given[0], cores) if given is not None else None
    if given is None or workers is None:
        return Pool("uvicorn", ASYNC, 1, 1, "uvicorn's default of one process")
    return Pool("uvicorn", ASYNC, workers, 1, given[1])
