"""gunicorn's command line for the demo stack, by worker class.

- "sync": `workers` processes, one request at a time each: `workers` slots.
- "gthread": `workers` processes of `threads` threads each: `workers × threads` slots.
- "uvicorn": `workers` processes each running an asyncio event loop with the ASGI app
  (`pinchpoint.demo.asgi_app`). The probe's wait is an `await`, so a process holds any
  number of waiting requests; there is no pool of slots, and the plan gets no `workers`.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT

WORKER_CLASSES = ("sync", "gthread", "uvicorn")
WSGI_APP = "pinchpoint.demo.app:wsgi()"
ASGI_APP = "pinchpoint.demo.asgi_app:asgi()"
# uvicorn's worker, writing gunicorn's access log in the configured format.
UVICORN_WORKER = "pinchpoint.demo.asgi_app.AccessLogUvicornWorker"


def check_worker_class(worker_class: str, threads: int) -> None:
    """Raises ValueError for an unknown class, or threads other than 1 outside gthread."""
    if worker_class not in WORKER_CLASSES:
        raise ValueError(f"worker_class must be one of {WORKER_CLASSES}, got {worker_class!r}")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if threads != 1 and worker_class != "gthread":
        raise ValueError(f"threads={threads} needs worker_class='gthread', not {worker_class!r}")


def slots(worker_class: str, workers: int, threads: int) -> int | None:
    """Requests the server can serve at once, or None for an event loop (no fixed pool)."""
    if worker_class == "uvicorn":
        return None
    return workers * threads if worker_class == "gthread" else workers


def _klass(worker_class: str) -> str:
    return {"sync": "sync", "gthread": "gthread", "uvicorn": UVICORN_WORKER}[worker_class]


def pool_config(workers: int, worker_class: str, threads: int) -> str:
    """A gunicorn.conf.py setting the pool, as a user writes it."""
    lines = [f"workers = {workers}", f"worker_class = {_klass(worker_class)!r}"]
    if worker_class == "gthread":
        lines.append(f"threads = {threads}")
    return "\n".join(lines) + "\n"


def pool_flags(workers: int, worker_class: str, threads: int) -> list[str]:
    """The command-line flags setting the pool."""
    flags = ["--workers", str(workers), "--worker-class", _klass(worker_class)]
    return [*flags, "--threads", str(threads)] if worker_class == "gthread" else flags


def gunicorn_argv(
    workdir: Path,
    bind: str,
    workers: int,
    worker_class: str,
    threads: int,
    config: Path | None = None,
) -> list[str]:
    """The command running gunicorn with the demo app, its files in workdir; the pool set
    by flags, or by the config file `config` (see pool_config) when given."""
    pool = ["-c", str(config)] if config is not None else pool_flags(workers, worker_class, threads)
    argv = [
        sys.executable, "-m", "gunicorn",
        *pool,
        "--bind", bind,
        "--access-logfile", str(workdir / "gunicorn-access.log"),
        "--access-logformat", GUNICORN_FORMAT,
        "--error-logfile", str(workdir / "gunicorn-error.log"),
        "--pid", str(workdir / "gunicorn.pid"),
        "--backlog", "2048",
        "--timeout", "60",
        # The stack stops once its run is over: no request to let finish, and gunicorn's
        # master waited 0.2 to 0.8 s in steps of 0.1 s for its workers to leave.
        "--graceful-timeout", "0",
        # Import the app once before forking: workers are ready when the stack is, and
        # the first load step does not measure two dozen interpreters importing Flask.
        "--preload",
    ]  # fmt: skip
    if gunicorn_has_control_socket():
        # Else every stack of this user would share one socket in ~/.gunicorn.
        argv.append("--no-control-socket")
    return [*argv, ASGI_APP if worker_class == "uvicorn" else WSGI_APP]


@functools.cache
def gunicorn_has_control_socket() -> bool:
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--help"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return "--no-control-socket" in result.stdout
