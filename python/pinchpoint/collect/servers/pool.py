"""A server's pool of request slots, and the process it is read from.

A pool is `processes × threads` slots for servers whose workers each serve one request per
thread (gunicorn's sync and gthread workers, uWSGI's processes and threads); an event loop
(uvicorn, hypercorn and daphne, gunicorn's uvicorn, gevent and eventlet workers, uWSGI's
async modes) holds any number of waiting requests, so it has no slots at all and says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pinchpoint.probe.work import LOG_ENV

SYNC, THREADS, ASYNC = "sync", "threads", "async"


@dataclass(frozen=True)
class Pool:
    """What a server says of its pool: its worker processes, each one's threads, their kind,
    and where each number was read ("command line", "config file gunicorn.conf.py", ...)."""

    server: str
    kind: str
    processes: int | None
    threads: int
    source: str

    @property
    def slots(self) -> int | None:
        """Requests served at once; None for an event loop or an unknown process count."""
        if self.kind == ASYNC or self.processes is None:
            return None
        return self.processes * self.threads


@dataclass(frozen=True)
class ServerProcess:
    """A server's main process as /proc shows it: its command line, working directory,
    environment (only when it may be read) and how many children it has."""

    pid: int
    argv: list[str]
    cwd: Path | None = None
    environ: dict[str, str] = field(default_factory=dict)
    children: int = 0

    def path(self, name: str) -> Path:
        """A path of its command line or config, relative to its working directory."""
        path = Path(name)
        return path if path.is_absolute() or self.cwd is None else self.cwd / path


def read_process(
    pid: int, children: int, environ: bool, proc: Path = Path("/proc")
) -> ServerProcess | None:
    """The process `pid` as /proc shows it; None when it is gone or not readable. The
    environment is read only when `environ` (it may hold secrets: only the servers' own
    option variables are ever kept)."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not argv:
        return None
    try:
        cwd: Path | None = Path(os.readlink(proc / str(pid) / "cwd"))
    except OSError:
        cwd = None
    env = _environ(proc / str(pid) / "environ") if environ else {}
    return ServerProcess(pid, argv, cwd, env, children)


# The only variables of a server's environment that are kept: its own options.
SERVER_VARIABLES = frozenset(
    {
        "GUNICORN_CMD_ARGS",
        "WEB_CONCURRENCY",
        "UWSGI_PROCESSES",
        "UWSGI_THREADS",
        "UWSGI_INI",
        "UVICORN_WORKERS",
        "UVICORN_UDS",
        "UVICORN_HOST",
        "UVICORN_PORT",
        "CATALINA_PID",
        LOG_ENV,
    }
)


def _environ(path: Path) -> dict[str, str]:
    try:
        raw = path.read_bytes()
    except OSError:
        return {}
    out = {}
    for entry in raw.split(b"\0"):
        name, _, value = entry.decode(errors="replace").partition("=")
        if name in SERVER_VARIABLES:
            out[name] = value
    return out
