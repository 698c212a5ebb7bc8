"""PostgreSQL's tier: its data directory and `postmaster.pid`, and its statement log as its
settings say (pg_conf.py): where the log is (the logging collector's file, else the
postmaster's stderr), its format (`log_line_prefix`, `csvlog`, `jsonlog`), and whether it
logs the durations and the prefix pinchpoint needs, with the lines to add when it does not."""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import shlex
from pathlib import Path

import psutil

from pinchpoint.collect.servers import files
from pinchpoint.collect.servers.files import read_text
from pinchpoint.discover.pg_clients import example_dsn
from pinchpoint.discover.pg_conf import (
    AUTO_FILE,
    COMMAND_LINE,
    CONFIG_FILE,
    PgSettings,
    is_on,
    milliseconds,
    quoted,
    settings_of,
)
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.logformats.postgresql import CSVLOG, JSONLOG, POSTGRESQL_PREFIX, compile_prefix

PID_FILE = "postmaster.pid"
RELOAD = "then SELECT pg_reload_conf()"
RESTART = "then restart it"
_SUFFIXES = {CSVLOG: ".csv", JSONLOG: ".json"}
_TIMES = ("%m", "%t", "%n")
_ENGLISH = re.compile(r"(c|posix|en(_\w+)?)([.@].*)?", re.IGNORECASE)


def read_postgres(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The tier of the PostgreSQL whose postmaster is `pid`."""
    tier = Tier("postgres", "database", pid)
    conf = settings_of(argv, _cwd(pid))
    tier.warnings += conf.problems
    if conf.config_file is not None:
        tier.notes.append(f"settings from {conf.config_file} and what it includes")
    _pid_file(tier, conf)
    _log(tier, conf)
    _messages(tier, conf)
    tier.client_dsn = example_dsn(pid, address)
    return tier


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


def _pid_file(tier: Tier, conf: PgSettings) -> None:
    if conf.data_dir is None:
        tier.warnings.append("its data directory is not known: the plan names its pids")
        return
    path = conf.data_dir / PID_FILE
    try:
        first = read_text(path, 4096).split("\n", 1)[0]
    except OSError as e:
        tier.warnings.append(f"cannot read {path} ({e.strerror}): the plan names its pids")
        return
    if first.strip() != str(tier.pid):
        tier.warnings.append(f"{path} holds no pid {tier.pid}: the plan names its pids")
        return
    tier.pid_file = path
    tier.notes.append(f"pid file {path}, in its data directory")


def _log(tier: Tier, conf: PgSettings) -> None:
    destinations = {d.strip().lower() for d in conf.value("log_destination").split(",")}
    kind = next((k for k in ("stderr", CSVLOG, JSONLOG) if k in destinations), None)
    collector = is_on(conf.value("logging_collector"))
    if kind is None:
        tier.warnings.append(
            f"log_destination {conf.value('log_destination')!r} ({conf.source('log_destination')}) "
            f"writes no file: set {_line(conf, 'log_destination', 'stderr')} and "
            f"{_line(conf, 'logging_collector', 'on', RESTART)}"
        )
        return
    if collector:
        path = _collected(tier, conf, kind)
    elif kind == "stderr":
        path = _stderr(tier, conf)
    else:
        tier.warnings.append(
            f"{kind} is written only by the logging collector: set "
            f"{_line(conf, 'logging_collector', 'on', RESTART)}"
        )
        return
    if path is None:
        return
    if kind == "stderr":
        prefix = conf.value("log_line_prefix")
        if not _prefix_reads(tier, conf, prefix):
            return
        tier.log_format_string = prefix if prefix != POSTGRESQL_PREFIX else None
    else:
        tier.log_format_string = kind
    tier.log_path, tier.log_format = path, "postgresql"
    if not os.access(path, os.R_OK):
        tier.warnings.append(f"{path} cannot be read by this user: run pinchpoint as one who can")
    _durations(tier, conf)


def _collected(tier: Tier, conf: PgSettings, kind: str) -> Path | None:
    """The logging collector's current file of this kind: the one its logger process holds
    open, else the newest that log_filename names."""
    folder = Path(conf.value("log_directory"))
    if not folder.is_absolute() and conf.data_dir is not None:
        folder = conf.data_dir / folder
    pattern = _named(conf.value("log_filename"), kind)
    where = (
        f"log_directory {folder} ({conf.source('log_directory')}), "
        f"log_filename {conf.value('log_filename')!r} ({conf.source('log_filename')})"
    )
    path = _held_open(tier.pid, folder, pattern) or _newest(folder, pattern)
    if path is None:
        tier.warnings.append(f"no {kind} log file found in {where}")
        return None
    tier.notes.append(f"log {path}: the logging collector's {kind} file in {where}")
    if "%" in conf.value("log_filename").replace("%%", ""):
        tier.warnings.append(
            "log_filename holds a time pattern: the plan names today's file, and a rotation "
            "during a run writes on in another; give it a fixed name, e.g. "
            f"{_line(conf, 'log_filename', 'postgresql.log')}"
        )
    return path


def _named(log_filename: str, kind: str) -> str:
    """The glob of the files log_filename names for a kind (csvlog's `.log` becomes `.csv`)."""
    pattern = re.sub(r"%(.)", lambda m: "%" if m[1] == "%" else "*", glob.escape(log_filename))
    suffix = _SUFFIXES.get(kind)
    if suffix is None:
        return pattern
    return pattern.removesuffix(".log") + suffix


def _held_open(postmaster: int, folder: Path, pattern: str) -> Path | None:
    """The file in `folder` that log_filename names which the logger process writes."""
    for child in _children(postmaster):
        try:
            if "logger" not in " ".join(child.cmdline()):
                continue
            # Its stdin, stdout and stderr are the postmaster's, not the collector's files.
            files = [Path(f.path) for f in child.open_files() if f.fd > 2]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for path in files:
            if path.parent == folder.resolve() and fnmatch.fnmatchcase(path.name, pattern):
                return path
    return None


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _newest(folder: Path, pattern: str) -> Path | None:
    found = [Path(p) for p in files.glob(str(folder / pattern)) if os.path.isfile(p)]
    return max(found, key=lambda p: p.stat().st_mtime, default=None)


def _stderr(tier: Tier, conf: PgSettings) -> Path | None:
    """The postmaster's stderr, where it logs without the logging collector."""
    try:
        target = Path(os.readlink(f"/proc/{tier.pid}/fd/2"))
    except OSError:
        target = None
    if target is None or not target.is_file():
        tier.warnings.append(
            f"logging_collector is off and its stderr ({target or 'unknown'}) is not a file: "
            f"set {_line(conf, 'logging_collector', 'on', RESTART)}"
        )
        return None
    tier.notes.append(f"log {target}: its stderr (logging_collector off)")
    return target


def _prefix_reads(tier: Tier, conf: PgSettings, prefix: str) -> bool:
    """Whether the prefix compiles; warns when it lacks a time or the pid."""
    try:
        compile_prefix(prefix)
    except Exception as e:  # a prefix that does not compile is the server's config's fault
        tier.warnings.append(f"log_line_prefix {prefix!r} does not compile: {e}")
        return False
    lacks = [
        what
        for what, ok in (("a time (%m)", _has_time(prefix)), ("the pid (%p)", "%p" in prefix))
        if not ok
    ]
    if lacks:
        tier.warnings.append(
            f"log_line_prefix {prefix!r} ({conf.source('log_line_prefix')}) lacks "
            f"{' and '.join(lacks)}: set {_line(conf, 'log_line_prefix', _fixed_prefix(prefix))}"
        )
    tier.notes.append(f"log_line_prefix {prefix!r} from {conf.source('log_line_prefix')}")
    return True


def _has_time(prefix: str) -> bool:
    return any(escape in prefix for escape in _TIMES)


def _fixed_prefix(prefix: str) -> str:
    if not _has_time(prefix):
        return "%m [%p] " + prefix.replace("[%p] ", "").replace("%p", "")
    return prefix.rstrip() + " [%p] "


def _durations(tier: Tier, conf: PgSettings) -> None:
    least = milliseconds(conf.value("log_min_duration_statement"))
    source = conf.source("log_min_duration_statement")
    wanted = _line(conf, "log_min_duration_statement", "0")
    if least is not None and least == 0:
        tier.notes.append(
            f"every statement's duration logged (log_min_duration_statement, {source})"
        )
    elif least is not None and least > 0:
        tier.warnings.append(
            f"only statements over {least:g} ms are logged (log_min_duration_statement, "
            f"{source}): set {wanted}"
        )
    elif is_on(conf.value("log_duration")):
        tier.warnings.append(
            f"log_duration logs durations without their statements, so without a comment's "
            f"tag: set {wanted}"
        )
    else:
        tier.warnings.append(f"PostgreSQL logs no statement durations: set {wanted}")


def _messages(tier: Tier, conf: PgSettings) -> None:
    language = conf.value("lc_messages")
    if language and not _ENGLISH.fullmatch(language):
        tier.warnings.append(
            f"lc_messages {language!r} ({conf.source('lc_messages')}): its log is read in "
            f"English; set {_line(conf, 'lc_messages', 'C')}"
        )


def _line(conf: PgSettings, name: str, value: str, then: str = RELOAD) -> str:
    """How to set a setting so that it wins: where it is set now (the command line, a
    file's line, ALTER SYSTEM's file), else in the config file; and what makes it count."""
    line = f"{name} = {quoted(value)}"
    file = conf.file(name)
    if conf.source(name) == COMMAND_LINE:
        return f"`-c {shlex.quote(f'{name}={value}')}` on its command line (then restart it)"
    if file is not None and file.name == AUTO_FILE:
        return f"`ALTER SYSTEM SET {line}` ({then})"
    if file is not None:
        return f"`{line}` at {conf.source(name)} ({then})"
    return f"`{line}` in {conf.config_file or CONFIG_FILE} ({then})"
