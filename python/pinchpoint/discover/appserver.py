"""gunicorn's and uWSGI's tiers, from the settings they run with (their command line,
environment and config files, as collect/servers settles them): their pool, access log and
its format, pid file, and the listeners on this host their workers hold connections to."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import psutil

from pinchpoint.collect.servers import files, gunicorn, pool_of, uwsgi
from pinchpoint.collect.servers.pool import ASYNC, ServerProcess, read_process
from pinchpoint.discover.hops import add_next_hops
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import choose_processes
from pinchpoint.logformats.base import FormatError
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint.logformats.gunicorn import parser_for as gunicorn_parser
from pinchpoint.logformats.uwsgi import parser_for as uwsgi_parser
from pinchpoint.probe.work import LOG_ENV

# gunicorn's own access_log_format, used when none is set: it logs no duration.
GUNICORN_DEFAULT_FORMAT = '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s"'
# Atoms of a gunicorn format that carry the request's URL, and with it the run's tag.
_GUNICORN_TAGGED = ("r", "U", "{x-pinchpoint}i")
_STDOUT, _STDERR = 1, 2

Settings = dict[str, tuple[str, str]]


def read_gunicorn(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the gunicorn whose master is `pid`."""
    process = _process(pid, argv)
    found = gunicorn.settings(process, _cores())
    tier = Tier("gunicorn", "app_server", pid)
    _pool(tier, process)
    _gunicorn_log(tier, process, found)
    _pid_file(tier, process, found.get("pidfile"), "--pid")
    _next_hops(tier)
    _probe_log(tier, process)
    return tier


def read_uwsgi(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the uWSGI whose master (or first worker) is `pid`."""
    process = _process(pid, argv)
    found = uwsgi.settings(process)
    tier = Tier("uwsgi", "app_server", pid)
    _pool(tier, process)
    _uwsgi_log(tier, process, found)
    _pid_file(tier, process, found.get("pidfile"), "--pidfile")
    _next_hops(tier)
    _probe_log(tier, process)
    return tier


def read_asgi(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the uvicorn, hypercorn or daphne whose main process is `pid`: an event
    loop in each of its processes. Their own access lines carry no duration, so its time
    is read from the probe's log, where the app has one."""
    process = _process(pid, argv)
    pool = pool_of(process, _cores())
    name = pool.server if pool is not None else Path(argv[0]).name
    tier = Tier(name, "app_server", pid)
    _pool(tier, process)
    tier.warnings.append(
        f"{name}'s access lines hold no duration: its time per request is read from the "
        f"app's probe log ({LOG_ENV}), or run the app under gunicorn -k "
        f"uvicorn.workers.UvicornWorker with `--access-logformat {shlex.quote(GUNICORN_FORMAT)}`"
    )
    choose_processes(tier, argv)
    _next_hops(tier)
    _probe_log(tier, process)
    return tier


def _probe_log(tier: Tier, process: ServerProcess) -> None:
    """The app inside the server, where its environment names the probe's log."""
    path = process.environ.get(LOG_ENV)
    if not path:
        tier.notes.append(
            f"no {LOG_ENV} in its environment: the app's own time is not logged apart "
            "(mount the probe with a log to see it)"
        )
        return
    log = process.path(path)
    app = Tier("app", "app", tier.pid, log_path=log, log_format="probe")
    app.notes.append(f"the probe's log {log}, from {LOG_ENV} in {tier.name}'s environment")
    tier.inside.append(app)


def _cores() -> int:
    return os.cpu_count() or 1


def _process(pid: int, argv: list[str]) -> ServerProcess:
    try:
        children = len(psutil.Process(pid).children())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        children = 0
    return read_process(pid, children, environ=True) or ServerProcess(pid, argv)


def _pool(tier: Tier, process: ServerProcess) -> None:
    pool = pool_of(process, _cores())
    if pool is None:
        return
    if pool.kind == ASYNC:
        each = f" in each of {pool.processes} processes" if (pool.processes or 0) > 1 else ""
        tier.notes.append(f"an event loop{each} ({pool.source}): no fixed pool of slots")
        return
    tier.slots = pool.slots
    threads = f" × {pool.threads} threads" if pool.threads > 1 else ""
    tier.notes.append(f"slots: {pool.slots} = {pool.processes} processes{threads} ({pool.source})")


def _gunicorn_log(tier: Tier, process: ServerProcess, found: Settings) -> None:
    if "accesslog" not in found:
        suggested = process.path("gunicorn-access.log")
        tier.warnings.append(
            "gunicorn writes no access log: add "
            f"`--access-logfile {suggested} --access-logformat {shlex.quote(GUNICORN_FORMAT)}` "
            "(accesslog and access_log_format in a config file)"
        )
        return
    value, source = found["accesslog"]
    path = _log_file(tier, process, value, "accesslog", source, _STDOUT)
    if path is None:
        return
    fmt, fmt_source = found.get(
        "access_log_format", (GUNICORN_DEFAULT_FORMAT, "gunicorn's default access_log_format")
    )
    try:
        parser = gunicorn_parser(fmt)
    except FormatError:
        tier.warnings.append(
            f"its access log format ({fmt_source}) gives no duration: add %(D)s, e.g. "
            f"`--access-logformat {shlex.quote(_with_duration(fmt))}` "
            "(access_log_format in a config file)"
        )
        return
    if not any(atom in parser.groups for atom in _GUNICORN_TAGGED):
        tier.warnings.append(
            f"its access log format ({fmt_source}) has no %(r)s: its lines cannot be matched "
            "to the run's requests; add %(r)s"
        )
    tier.log_path, tier.log_format, tier.log_format_string = path, "gunicorn", fmt
    tier.notes.append(f"access_log_format from {fmt_source}")


def _with_duration(fmt: str) -> str:
    """A format with %(D)s added: pinchpoint's own when it has no atom at all."""
    return f"{fmt} %(D)s" if "%(" in fmt else GUNICORN_FORMAT


def _uwsgi_log(tier: Tier, process: ServerProcess, found: Settings) -> None:
    if uwsgi.is_set(found, "disable-logging"):
        tier.warnings.append(
            f"uWSGI logs no requests (disable-logging, {found['disable-logging'][1]}): remove it"
        )
        return
    path = _uwsgi_log_file(tier, process, found)
    if path is None:
        tier.warnings.append(
            "uWSGI writes its requests to no file this host can read: add "
            f"`req-logger = file:{process.path('uwsgi-requests.log')}` to its ini file "
            "(--req-logger on its command line)"
        )
        return
    fmt = found.get("log-format")
    if fmt is not None:
        try:
            uwsgi_parser(fmt[0])
        except FormatError:
            tier.warnings.append(
                f"its log-format ({fmt[1]}) gives no duration: add %(micros) to it"
            )
            return
        tier.log_format_string = fmt[0]
        tier.notes.append(f"log-format from {fmt[1]}")
    else:
        tier.notes.append("request log in uWSGI's default request line")
    tier.log_path, tier.log_format = path, "uwsgi"


def _uwsgi_log_file(tier: Tier, process: ServerProcess, found: Settings) -> Path | None:
    """Where uWSGI writes its request lines: its request logger, else its general log
    (a logger, logto or daemonize), else its stderr."""
    for key in ("req-logger", "logger"):
        if key in found:
            value, source = found[key]
            # `name plugin:args` names a logger; `file:PATH` alone is the common form.
            target = value if value.startswith("file:") else value.split(None, 1)[-1]
            if not target.startswith("file:"):
                tier.warnings.append(
                    f"its {key} {value!r} ({source}) is not a file: pinchpoint reads files; "
                    f"use `req-logger = file:{process.path('uwsgi-requests.log')}`"
                )
                return None
            path = process.path(target[len("file:") :])
            return _noted(tier, path, f"{key} {value} from {source}")
    for key in ("logto", "daemonize"):
        if key in found:
            value, source = found[key]
            if "/" not in value and ":" in value:
                continue  # a UDP address, not a file
            path = _noted(tier, process.path(value), f"{key} {value} from {source}")
            tier.notes.append("its requests share that log with uWSGI's other messages")
            return path
    stderr = _stream_file(process.pid, _STDERR)
    return _noted(tier, stderr, f"no logger set: its stderr, {stderr}") if stderr else None


def _log_file(
    tier: Tier, process: ServerProcess, value: str, what: str, source: str, fd: int
) -> Path | None:
    """The file a server logs to: `value`, or `-` for its stdout or stderr (`fd`) when that
    is a file; None with a warning when it is not."""
    if value != "-":
        return _noted(tier, process.path(value), f"{what} {value} from {source}")
    target = _stream_file(process.pid, fd)
    stream = "stdout" if fd == _STDOUT else "stderr"
    if target is None:
        tier.warnings.append(
            f"its {what} goes to its {stream} ({source}), which is not a file: give it a file"
        )
        return None
    return _noted(tier, target, f"{what} - from {source}: its {stream}, {target}")


def _stream_file(pid: int, fd: int) -> Path | None:
    """The regular file a process's stdout or stderr is; None for a terminal, pipe or
    socket."""
    try:
        target = Path(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        return None
    return target if target.is_file() else None


def _noted(tier: Tier, path: Path, note: str) -> Path:
    tier.notes.append(note)
    if not path.is_file():
        tier.notes.append(f"{path} does not exist yet: it appears with the first request")
    return path


def _pid_file(tier: Tier, process: ServerProcess, given: tuple[str, str] | None, flag: str) -> None:
    if given is None:
        tier.warnings.append(
            f"no pid file: the plan names its pids, valid until it restarts; add "
            f"`{flag} {process.path(tier.name + '.pid')}`"
        )
        return
    path = process.path(given[0])
    if _pid_in(path) != process.pid:
        tier.warnings.append(
            f"its pid file {path} ({given[1]}) does not hold its pid {process.pid}: "
            "the plan names its pids"
        )
        return
    tier.pid_file = path
    tier.notes.append(f"pidfile {given[0]} from {given[1]}")


def _pid_in(path: Path) -> int | None:
    try:
        return int(files.read_text(path, 64).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _next_hops(tier: Tier) -> None:
    add_next_hops(tier, "workers")
    if not tier.next_hops:
        tier.notes.append(
            "its workers held no connection to another server on this host when read "
            "(one connected to per request does not show)"
        )
