"""The HAProxy tier, from the config files of its command line: the frontend (or listen)
bound where the request arrived, its default backend's servers, its log and the log's
format, its connection limits and its pid file."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from pinchpoint.discover.configs import Unreadable, check_pid_file, host_matches, read_text, under
from pinchpoint.discover.haproxy_conf import Line, Section, config_files, load
from pinchpoint.discover.tier import Address, Tier

NAME = "haproxy"
ROLE = "proxy"
# `option httplog` written out as a log-format (HAProxy 2.x's documentation).
HTTPLOG_FORMAT = (
    "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc "
    "%ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r"
)
# The log line pinchpoint's demo writes, and how its lines reach a file.
DEMO_LOG = (
    "log to HAProxy's stdout as pinchpoint's demo does: `log stdout format raw local0 info` "
    "in global, with HAProxy's output sent to a file"
)
_STD_STREAMS = {"stdout": 1, "stderr": 2, "fd@1": 1, "fd@2": 2}
_FAMILIES = ("ipv4@", "ipv6@", "tcp@", "tcp4@", "tcp6@")
_RSYSLOG_FILES = "/etc/rsyslog.d/*.conf"


@dataclass(frozen=True)
class Command:
    """A HAProxy command line: its config files and directories, pid file and the directory
    relative paths are taken from (-C, else the process's own)."""

    configs: list[str] = field(default_factory=list)
    pid_file: str | None = None
    chdir: str | None = None


def command_line(argv: list[str]) -> Command:
    configs: list[str] = []
    values: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            configs += argv[i:]
            break
        if arg in ("-f", "-p", "-C") and i < len(argv):
            value, i = argv[i], i + 1
        elif arg[:2] in ("-f", "-p", "-C") and len(arg) > 2:
            value = arg[2:]
        else:
            continue
        if arg.startswith("-f"):
            configs.append(value)
        else:
            values[arg[:2]] = value
    return Command(configs, values.get("-p"), values.get("-C"))


def read(pid: int, argv: list[str], address: Address, path: str) -> Tier:
    """The HAProxy tier whose main process is `pid`, for a request to `address`."""
    tier = Tier(NAME, ROLE, pid)
    command = command_line(argv)
    base = command.chdir or _cwd(pid)
    if not command.configs:
        tier.warnings.append("no -f on HAProxy's command line: its config cannot be found")
    files, warnings = config_files(command.configs, base)
    sections, read_files, unread = load(files)
    tier.warnings += warnings + unread
    tier.notes += [f"config read from {f}" for f in read_files]
    describe(sections, command, base, address, tier)
    return tier


def _cwd(pid: int) -> str:
    try:
        return str(psutil.Process(pid).cwd())
    except psutil.Error:
        return "/"


def describe(
    sections: list[Section], command: Command, base: str, address: Address, tier: Tier
) -> None:
    """What the config's sections say of a request to address, into tier."""
    settings = _global(sections)
    _pid_file(command, settings, base, tier)
    if settings is not None:
        _global_notes(settings, tier)
    front = _frontend(sections, address, tier)
    if front is None:
        return
    _log(front, settings, tier)
    backend = _backend(front, sections, tier)
    if backend is not None:
        tier.next_hops += _servers(backend, address, tier)


def _global(sections: list[Section]) -> Section | None:
    """The global settings, from all the global sections."""
    found = [s for s in sections if s.kind == "global"]
    if not found:
        return None
    return Section("global", "", found[0].header, [line for s in found for line in s.lines])


def _pid_file(command: Command, settings: Section | None, base: str, tier: Tier) -> None:
    line = settings.last("pidfile") if settings is not None else None
    if command.pid_file is not None:
        path, origin = command.pid_file, "-p on the command line"
    elif line is not None and len(line.words) > 1:
        path, origin = line.words[1], line.where
    else:
        where = f" ({settings.header.where})" if settings is not None else ""
        tier.warnings.append(
            f"HAProxy writes no pid file: add `pidfile /run/haproxy.pid` to its global "
            f"section{where}, or start it with -p"
        )
        return
    tier.pid_file = Path(under(base, path))
    tier.notes.append(f"pid file {tier.pid_file} from {origin}")
    if problem := check_pid_file(tier.pid_file, tier.pid):
        tier.warnings.append(problem)


def _global_notes(settings: Section, tier: Tier) -> None:
    for key in ("maxconn", "nbthread"):
        line = settings.last(key)
        if line is not None:
            tier.notes.append(f"{line.text()} in global from {line.where}")


@dataclass(frozen=True)
class _Bind:
    host: str | None
    ports: range | None
    unix: str | None


def _binds(section: Section) -> list[_Bind]:
    found = []
    for line in section.all("bind"):
        for spec in line.words[1].split(",") if len(line.words) > 1 else []:
            spec = _strip_family(spec)
            if spec.startswith(("unix@", "/")):
                found.append(_Bind(None, None, spec.removeprefix("unix@")))
                continue
            host, _, ports = spec.rpartition(":")
            low, _, high = ports.partition("-")
            if low.isdigit() and (high or low).isdigit():
                found.append(
                    _Bind(host.strip("[]") or None, range(int(low), int(high or low) + 1), None)
                )
    return found


def _strip_family(spec: str) -> str:
    for family in _FAMILIES:
        if spec.startswith(family):
            return spec[len(family) :]
    return spec


def _reaches(bind: _Bind, address: Address) -> bool:
    if address.unix is not None:
        return bind.unix is not None and Path(bind.unix) == address.unix
    in_range = bind.ports is not None and address.port in bind.ports
    return in_range and host_matches(bind.host, address.host)


def _frontend(sections: list[Section], address: Address, tier: Tier) -> Section | None:
    """The frontend or listen section bound where the request arrived."""
    for section in sections:
        if section.kind in ("frontend", "listen") and any(
            _reaches(b, address) for b in _binds(section)
        ):
            tier.notes.append(
                f"{section.kind} {section.name} from {section.header.where} binds {address}"
            )
            _maxconn(section, tier)
            return section
    tier.warnings.append(f"no frontend or listen section of the config binds {address}")
    return None


def _maxconn(section: Section, tier: Tier) -> None:
    line = section.setting("maxconn")
    if line is not None:
        tier.notes.append(f"{line.text()} in {section.kind} {section.name} from {line.where}")


def _backend(front: Section, sections: list[Section], tier: Tier) -> Section | None:
    """The section whose servers get the frontend's requests: its default_backend, else
    (for a listen section) its own."""
    for use in front.all("use_backend"):
        tier.notes.append(f"{use.text()} from {use.where}: not followed (the default is)")
    line = front.setting("default_backend")
    if line is None or len(line.words) < 2:
        if front.kind == "listen":
            return front
        tier.warnings.append(
            f"{front.kind} {front.name} ({front.header.where}) has no default_backend: add the "
            "next tier's component by hand"
        )
        return None
    name = line.words[1]
    backend = next(
        (s for s in sections if s.kind in ("backend", "listen") and s.name == name), None
    )
    if backend is None:
        tier.warnings.append(f"default_backend {name} ({line.where}) is not in the config")
        return None
    tier.notes.append(f"default_backend {name} from {line.where}")
    return backend


def _param(words: list[str], key: str) -> str | None:
    return words[words.index(key) + 1] if key in words[:-1] else None


def _servers(backend: Section, address: Address, tier: Tier) -> list[Address]:
    """The addresses of the backend's servers (not the backup or disabled ones)."""
    default = backend.setting("default-server")
    default_maxconn = _param(default.words, "maxconn") if default else None
    hops = []
    limits: list[int | None] = []
    for line in backend.all("server"):
        if len(line.words) < 3:
            continue
        params = line.words[3:]
        if "backup" in params or "disabled" in params:
            tier.notes.append(f"{line.text()} from {line.where}: not followed (backup or disabled)")
            continue
        hop = _server_address(line.words[2], address)
        if hop is None:
            tier.warnings.append(f"server {line.words[2]} at {line.where}: address not followed")
            continue
        hops.append(hop)
        maxconn = _param(params, "maxconn") or default_maxconn
        limits.append(int(maxconn) if maxconn and maxconn.isdigit() else None)
        limit = (
            f": at most {maxconn} requests at once, the others wait in HAProxy's queue"
            if maxconn
            else ""
        )
        tier.notes.append(f"server {line.words[1]} {line.words[2]} from {line.where}{limit}")
    for line in backend.all("server-template"):
        tier.warnings.append(f"server-template at {line.where}: its servers are not followed")
    if limits and all(limits):
        tier.limit = sum(n for n in limits if n)
    return hops


def _server_address(spec: str, address: Address) -> Address | None:
    """A server's address: `host:port`, `host` (the port the request came to), a `+N` or
    `-N` port offset from it, `unix@/path` or `/path`."""
    spec = _strip_family(spec)
    if spec.startswith(("unix@", "/")):
        return Address(unix=Path(spec.removeprefix("unix@")))
    if "@" in spec:  # abns@, sockpair@, ...: not on a path or port
        return None
    host, sep, port = spec.rpartition(":")
    if not sep or not re.fullmatch(r"[+-]?\d+", port):
        host, port = spec, "+0"
    number = int(port)
    if port.startswith(("+", "-")):
        if address.port is None:
            return None
        number += address.port
    return Address(host.strip("[]"), number)


def _log(front: Section, settings: Section | None, tier: Tier) -> None:
    """The frontend's log file and format, where they are ones pinchpoint reads."""
    _check_mode(front, tier)
    usable, custom = _log_format(front, tier)
    if not usable:
        return
    targets = _log_targets(front, settings)
    if not targets:
        tier.warnings.append(
            f"{front.kind} {front.name} ({front.header.where}) logs nowhere: {DEMO_LOG}"
        )
        return
    path = next((p for t in targets if (p := _stream_file(t, tier)) is not None), None)
    if path is None:
        syslog = next((t for t in targets if t.words[1] not in _STD_STREAMS), None)
        if syslog is not None:
            _syslog_warning(syslog, tier)
        return
    tier.log_path, tier.log_format, tier.log_format_string = path, NAME, custom


def _check_mode(front: Section, tier: Tier) -> None:
    mode = front.setting("mode")
    if mode is None or mode.words[1:2] != ["http"]:
        where = mode.where if mode else front.header.where
        tier.warnings.append(
            f"{front.kind} {front.name} is not `mode http` ({where}): HAProxy logs no HTTP "
            "requests; pinchpoint reads `mode http` with `option httplog`"
        )


def _with_defaults(section: Section) -> list[Line]:
    """The section's defaults' lines then its own: the last of a setting wins."""
    return [*(section.defaults.lines if section.defaults else []), *section.lines]


def _sets_format(line: Line) -> bool:
    words = line.words[1:] if line.starts("no") else line.words
    return words[:1] == ["log-format"] or (
        words[:1] == ["option"] and words[1:2] in (["httplog"], ["httpslog"], ["tcplog"])
    )


def _log_format(front: Section, tier: Tier) -> tuple[bool, str | None]:
    """Whether the frontend logs lines the haproxy format reads, and its log-format when
    not httplog's."""
    chosen = next((line for line in reversed(_with_defaults(front)) if _sets_format(line)), None)
    if chosen is not None and chosen.words == ["option", "httplog"]:
        tier.notes.append(f"option httplog from {chosen.where}")
        return True, None
    if chosen is not None and chosen.starts("log-format"):
        return True, _custom_format(chosen, tier)
    what = f"`{chosen.text()}` at {chosen.where}" if chosen else "no `option httplog`"
    tier.warnings.append(
        f"HAProxy logs with {what}: pinchpoint reads httplog lines; add `option httplog` to "
        f"{front.kind} {front.name} ({front.header.where})"
    )
    return False, None


def _custom_format(line: Line, tier: Tier) -> str | None:
    """A log-format's text, None when it is httplog's written out."""
    text = line.text(1)
    if text.split() == HTTPLOG_FORMAT.split():
        tier.notes.append(f"log-format from {line.where}: the httplog format")
        return None
    tier.notes.append(f"log-format from {line.where}")
    tier.warnings.append(
        f"the log-format at {line.where} is not httplog's: the haproxy format reads `option "
        "httplog` lines only; replace that line with `option httplog`"
    )
    return text


def _log_targets(front: Section, settings: Section | None) -> list[Line]:
    """The `log` lines the frontend logs with: its defaults' then its own, `log global`
    standing for global's, `no log` dropping those before it."""
    targets: list[Line] = []
    for line in _with_defaults(front):
        if line.starts("no", "log"):
            targets = []
        elif line.starts("log", "global"):
            targets += settings.all("log") if settings is not None else []
        elif line.starts("log") and len(line.words) > 1:
            targets.append(line)
    return targets


def _stream_file(target: Line, tier: Tier) -> Path | None:
    """The file HAProxy's stdout or stderr goes to, for a `log stdout` line; else None."""
    fd = _STD_STREAMS.get(target.words[1])
    if fd is None:
        return None
    stream = "stdout" if fd == 1 else "stderr"
    try:
        path = os.readlink(f"/proc/{tier.pid}/fd/{fd}")
    except OSError as e:
        tier.warnings.append(
            f"HAProxy logs to its {stream} ({target.where}), which cannot be read ({e.strerror})"
        )
        return None
    if not path.startswith("/") or not os.path.isfile(path):
        tier.warnings.append(
            f"HAProxy logs to its {stream} ({target.where}), which goes to {path}, not a "
            "file: send its output to a file, or set the component's log path by hand"
        )
        return None
    tier.notes.append(f"{target.text()} from {target.where}: HAProxy's {stream} is {path}")
    return Path(path)


def _syslog_warning(target: Line, tier: Tier) -> None:
    hint = _rsyslog_hint()
    tier.warnings.append(
        f"HAProxy logs to syslog at {target.words[1]} ({target.where}): which file the "
        f"syslog daemon writes is not in HAProxy's config{hint}. Set the component's log "
        f"path by hand, or {DEMO_LOG}"
    )


def _rsyslog_hint() -> str:
    """Where rsyslog's own config says HAProxy's lines go, as a clause; "" when it does
    not say."""
    for conf in sorted(glob.glob(_RSYSLOG_FILES)):
        try:
            text = read_text(conf)
        except Unreadable:
            continue
        if "haproxy" in text:
            found = re.search(r"^\s*-?(/var/log/\S+)", text, re.MULTILINE)
            if found:
                return f" (rsyslog's {conf} writes HAProxy's lines to {found.group(1)})"
    return ""
