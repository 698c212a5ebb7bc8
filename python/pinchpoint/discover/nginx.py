"""The nginx tier, from the config its master runs: the `server` listening where the request
arrived, the `location` its path matches, where that location passes requests on, its access
log and that log's format, and the pid file.

The config is read as nginx reads it: `nginx -T` with the master's own `-p`, `-c` and
`-g`, or, where that fails (another user's files, another binary), the files themselves.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import psutil

from pinchpoint.collect.servers.files import Owner, acting_owner, confined
from pinchpoint.discover import commands
from pinchpoint.discover.configs import check_pid_file, under
from pinchpoint.discover.nginx_conf import Directive, Disk, Dump, Loader, Source
from pinchpoint.discover.nginx_routes import locations_for, next_hops, server_for
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.logformats.base import FormatError
from pinchpoint.logformats.nginx import (
    COMBINED_FORMAT,
    NGINX_FORMAT,
    NGINX_GRPC_FORMAT,
    compile_format,
)

NAME = "nginx"
ROLE = "proxy"
DUMP_TIMEOUT_S = 10.0
BUILD_TIMEOUT_S = 10.0
# What `nginx -T` may print: a bigger dump is not read (the files are, one by one, capped).
MOST_DUMP_BYTES = 32 * 1024 * 1024
# The options of nginx's command line; a -g value runs up to the next of them.
_FLAGS = frozenset({"-c", "-p", "-g", "-e", "-s", "-t", "-T", "-q", "-v", "-V", "-h", "-?"})
# What the plan's nginx format reads to time a request and place it in a step.
_NEEDED = ("request_time", "upstream_response_time")
_TIMES = ("msec", "time_local", "time_iso8601")


@dataclass(frozen=True)
class Command:
    """An nginx command line: its program and the values of its -c, -p, -g and -e."""

    binary: str
    options: dict[str, str]


def command_line(argv: list[str]) -> Command:
    """The command line of a master whose title is `nginx: master process <argv>` (as
    psutil reads it, split at spaces) or of one that kept its argv."""
    words = " ".join(argv).split()
    if words[:3] == ["nginx:", "master", "process"]:
        words = words[3:]
    options: dict[str, str] = {}
    i = 1
    while i < len(words):
        flag, glued = words[i][:2], words[i][2:]
        i += 1
        if flag not in ("-c", "-p", "-g", "-e"):
            continue
        if glued:
            options[flag] = glued
            continue
        end = i + 1
        if flag == "-g":
            while end < len(words) and words[end] not in _FLAGS:
                end += 1
        options[flag] = " ".join(words[i:end])
        i = end
    return Command(words[0] if words else NAME, options)


@dataclass(frozen=True)
class Build:
    """The paths compiled into an nginx binary (`nginx -V`), as nginx's defaults say when
    it does not tell."""

    prefix: str = "/usr/local/nginx/"
    conf_path: str = "conf/nginx.conf"
    pid_path: str = "logs/nginx.pid"
    http_log_path: str = "logs/access.log"


def build_of(binary: str) -> Build:
    """The paths compiled into the binary, as the acting owner runs it."""
    return _build_of(binary, acting_owner())


@functools.cache
def _build_of(binary: str, owner: Owner | None) -> Build:
    try:
        done = commands.run([binary, "-V"], BUILD_TIMEOUT_S, MOST_DUMP_BYTES)
    except commands.NotRun:
        return Build()
    said = (done.stderr + done.stdout).decode(errors="replace")
    found = {
        key: match.group(1)
        for key in ("prefix", "conf-path", "pid-path", "http-log-path")
        if (match := re.search(rf"--{key}=(\S+)", said))
    }
    default = Build()
    return Build(
        found.get("prefix", default.prefix),
        found.get("conf-path", default.conf_path),
        found.get("pid-path", default.pid_path),
        found.get("http-log-path", default.http_log_path),
    )


@dataclass
class Config:
    """The directives of the main context (-g's first), and the paths relative ones are
    taken from."""

    main: list[Directive]
    prefix: str
    build: Build

    def first(self, name: str) -> Directive | None:
        return next((d for d in self.main if d.name == name), None)

    def last(self, name: str) -> Directive | None:
        return next((d for d in reversed(self.main) if d.name == name), None)


def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The nginx tier whose master is `pid`, for a request to `address` and `path`."""
    pid, argv = master_of(pid, argv)
    tier = Tier(NAME, ROLE, pid)
    describe(load(pid, command_line(argv), tier), address, path, tier)
    return tier


def master_of(pid: int, argv: list[str]) -> tuple[int, list[str]]:
    """The master's pid and title for one of its workers (`nginx: worker process`, whose
    title says nothing of the config, or, just forked, still its master's title); the
    process itself otherwise."""
    if not " ".join(argv).startswith("nginx:"):
        return pid, argv
    try:
        parent = psutil.Process(pid).parent()
        if parent is not None and " ".join(parent.cmdline()).startswith("nginx: master"):
            return parent.pid, parent.cmdline()
    except psutil.Error:
        pass
    return pid, argv


def describe(config: Config, address: Address, path: str, tier: Tier) -> None:
    """What config says of a request to address and path, into tier."""
    _process(config, tier)
    http = config.first("http")
    if http is None:
        tier.warnings.append("the config has no http block: nginx serves no HTTP here")
        return
    server = server_for(http, address, tier)
    if server is None:
        return
    locations = locations_for(server, path)
    scopes = [*reversed(locations), server, http]
    _access_log(scopes, http, config, tier)
    _grpc_tag(locations, tier)
    _limits(scopes, tier)
    next_hops(locations, server, http, path, tier)


def load(pid: int, command: Command, tier: Tier) -> Config:
    """The master's config, read with `nginx -T` or else from its files."""
    binary = _binary(pid)
    build = build_of(binary)
    prefix = command.options.get("-p") or build.prefix
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    conf = under(prefix, command.options.get("-c") or build.conf_path)
    source: Source
    if confined():
        # `nginx -T` prints every file the config includes, wherever it is: only files
        # under the folders discovery may read are opened, one by one.
        dump, failure = None, "not run: discovery reads only the folders its agent lists"
    else:
        dump, failure = _dump(binary, command)
    if dump is not None:
        source, conf = dump, conf if conf in dump.files else dump.main or conf
        tier.notes.append(f"config read with `{binary} -T` from {conf}")
    else:
        source = Disk()
        tier.notes.append(f"`{binary} -T` {_failed(failure)}: config files read from disk")
    return read_config(source, conf, prefix, build, command.options.get("-g"), tier)


def _failed(failure: str) -> str:
    return failure if failure.startswith("not run") else f"failed ({failure})"


def read_config(
    source: Source, conf: str, prefix: str, build: Build, directives: str | None, tier: Tier
) -> Config:
    """The config whose main file is conf, with the -g directives; what cannot be read is
    in the tier's warnings."""
    loader = Loader(source, os.path.dirname(conf))
    main = loader.parse(directives, "the command line (-g)") if directives else []
    main += loader.load(conf)
    tier.warnings += loader.warnings
    return Config(main, prefix, build)


def _binary(pid: int) -> str:
    """The master's own program (/proc/PID/exe), never the name its title gives: a title is
    whatever its owner wrote. Where the program cannot be read or is not nginx, the nginx
    on PATH."""
    try:
        exe = psutil.Process(pid).exe()
    except psutil.Error:
        exe = ""
    if os.path.basename(exe).startswith(NAME) and os.path.isfile(exe):
        return exe
    return shutil.which(NAME) or NAME


def _dump(binary: str, command: Command) -> tuple[Dump | None, str]:
    """`nginx -T`'s files, or None and why not."""
    argv = [binary, "-T", "-q"]
    for flag in ("-p", "-c", "-g"):
        if flag in command.options:
            argv += [flag, command.options[flag]]
    if "-e" in command.options:
        # Its messages to us, not into the running server's error log.
        argv += ["-e", "stderr"]
    try:
        done = commands.run(argv, DUMP_TIMEOUT_S, MOST_DUMP_BYTES)
    except commands.NotRun as e:
        return None, str(e)
    if done.status < 0:
        return None, f"killed by signal {-done.status}"
    if done.status != 0:
        return None, f"status {done.status}: {commands.what_failed(done.stderr)}"
    dump = Dump(done.stdout.decode(errors="replace"))
    return (dump, "") if dump.files else (None, "it printed no config")


def _process(config: Config, tier: Tier) -> None:
    """The pid file, and the workers and connections nginx runs with, in the notes."""
    directive = config.last("pid")
    path = under(
        config.prefix, directive.args[0] if directive and directive.args else config.build.pid_path
    )
    origin = f"from {directive.where}" if directive else "(nginx's default)"
    tier.notes.append(f"pid {path} {origin}")
    tier.pid_file = Path(path)
    if problem := check_pid_file(tier.pid_file, tier.pid):
        tier.warnings.append(problem)
    workers = config.last("worker_processes")
    if workers is None:
        tier.notes.append("worker_processes 1 (nginx's default)")
    else:
        count = " ".join(workers.args)
        cores = f" ({os.cpu_count()} cores)" if count == "auto" else ""
        tier.notes.append(f"worker_processes {count}{cores} from {workers.where}")
    events = config.first("events")
    connections = events.first("worker_connections") if events else None
    if connections is not None:
        tier.notes.append(
            f"worker_connections {' '.join(connections.args)} from {connections.where}"
        )


def _effective(scopes: list[Directive], name: str) -> list[Directive]:
    """The directives called name that apply: those of the innermost scope that has any (as
    nginx inherits access_log and limit_conn)."""
    return next((found for scope in scopes if (found := scope.all(name))), [])


def _formats(http: Directive) -> dict[str, tuple[str, str]]:
    """Each log_format's text and where it is written (`combined` is nginx's own)."""
    formats = {"combined": (COMBINED_FORMAT, "nginx's predefined format")}
    for directive in http.all("log_format"):
        if directive.args:
            strings = [a for a in directive.args[1:] if not a.startswith("escape=")]
            formats[directive.args[0]] = ("".join(strings), directive.where)
    return formats


def _variables(log_format: str) -> frozenset[str]:
    try:
        return compile_format(log_format).variables
    except FormatError:
        return frozenset()


def _access_log(scopes: list[Directive], http: Directive, config: Config, tier: Tier) -> None:
    """The access log that applies to the location, a timed one first where there are
    several, and its format."""
    formats = _formats(http)
    logs = _effective(scopes, "access_log")
    if not logs:
        path = under(config.prefix, config.build.http_log_path)
        tier.notes.append(f"access_log {path} combined (nginx's default: no access_log set)")
        _set_log(tier, path, "combined", formats, None, http)
        return
    files = [d for d in logs if _writes_file(d)]
    if not files:
        _no_file_log(logs, tier)
        return
    for directive in files:
        if "$" in directive.args[0]:
            tier.warnings.append(
                f"access_log {directive.args[0]} at {directive.where} names its file with a "
                "variable: set the component's log path by hand"
            )
    files = [d for d in files if "$" not in d.args[0]]
    if not files:
        return
    chosen = next((d for d in files if _timed(d, formats)), files[0])
    path = under(config.prefix, chosen.args[0])
    tier.notes.append(f"access_log {path} {_format_name(chosen)} from {chosen.where}")
    tier.notes += [f"also access_log {d.args[0]} from {d.where}" for d in files if d is not chosen]
    _log_options(chosen, tier)
    _set_log(tier, path, _format_name(chosen), formats, chosen, http)


def _writes_file(access_log: Directive) -> bool:
    return (
        bool(access_log.args)
        and access_log.args[0] != "off"
        and not access_log.args[0].startswith("syslog:")
    )


def _timed(access_log: Directive, formats: dict[str, tuple[str, str]]) -> bool:
    text = formats.get(_format_name(access_log), ("", ""))[0]
    return "request_time" in _variables(text)


def _format_name(access_log: Directive) -> str:
    return access_log.args[1] if len(access_log.args) > 1 else "combined"


def _no_file_log(logs: list[Directive], tier: Tier) -> None:
    for log in logs:
        how = "is off" if log.args == ["off"] else f"goes to {log.args[0]}"
        tier.warnings.append(
            f"the access log {how} at {log.where}; pinchpoint reads a file: add "
            f"`access_log /var/log/nginx/pinchpoint.log pinchpoint;` there, with "
            f"`log_format pinchpoint '{NGINX_FORMAT}';` in the http block"
        )


def _log_options(access_log: Directive, tier: Tier) -> None:
    for option in access_log.args[2:]:
        if option.startswith("gzip"):
            tier.warnings.append(
                f"access_log at {access_log.where} is gzip-compressed: pinchpoint reads plain "
                "lines; drop `gzip`"
            )
        elif option.startswith("if="):
            tier.notes.append(f"access_log at {access_log.where} logs only where {option[3:]}")


def _set_log(
    tier: Tier,
    path: str,
    name: str,
    formats: dict[str, tuple[str, str]],
    access_log: Directive | None,
    http: Directive,
) -> None:
    if name not in formats:
        where = access_log.where if access_log else http.where
        tier.warnings.append(f"log_format {name} (used at {where}) is not in the config")
        return
    text, origin = formats[name]
    tier.log_path, tier.log_format, tier.log_format_string = Path(path), "nginx", text
    tier.notes.append(f"log_format {name} from {origin}")
    variables = _variables(text)
    missing = [f"${v}" for v in _NEEDED if v not in variables]
    if not set(_TIMES) & variables:
        missing.append("$msec")
    if not missing:
        return
    fix = (
        f"make the access_log at {access_log.where} `access_log {path} pinchpoint;`"
        if access_log
        else f"add `access_log {path} pinchpoint;` to it"
    )
    tier.warnings.append(
        f"log_format {name} has no {', '.join(missing)}, which pinchpoint needs to time each "
        f"request: add `log_format pinchpoint '{NGINX_FORMAT}';` to the http block "
        f"({http.where}), {fix}, reload nginx and run init again"
    )


def _grpc_tag(locations: list[Directive], tier: Tier) -> None:
    """A location passing gRPC calls needs their `X-Pinchpoint` metadata logged: a gRPC
    path takes no query, so the request line holds no tag."""
    block = locations[-1].block or [] if locations else []
    passing = next((d for d in block if d.name == "grpc_pass"), None)
    text = tier.log_format_string
    if passing is None or text is None or "http_x_pinchpoint" in _variables(text):
        return
    tier.warnings.append(
        f"grpc_pass at {passing.where}: a gRPC call carries the run's tag in its metadata "
        f"only, which this log_format does not log: use `log_format pinchpoint "
        f"'{NGINX_GRPC_FORMAT}';` (it adds $http_x_pinchpoint)"
    )


def _limits(scopes: list[Directive], tier: Tier) -> None:
    for directive in _effective(scopes, "limit_conn"):
        tier.notes.append(
            f"limit_conn {' '.join(directive.args)} from {directive.where}: requests beyond "
            "it at once are refused (limit_conn_status, 503 by default)"
        )
    for directive in _effective(scopes, "limit_req"):
        tier.notes.append(f"limit_req {' '.join(directive.args)} from {directive.where}")
