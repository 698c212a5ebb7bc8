"""A listening server init has no reader for (node, php-fpm, java, a plain python3): still a
tier of the plan, named for its program or the app server its command line names, with its
processes found as a tree, the listeners its processes hold connections to, and a warning
that its log is not known, with how to add it."""

from __future__ import annotations

import os
import re
from pathlib import Path

from pinchpoint.collect.resources.sampler import ProcessSelector
from pinchpoint.collect.servers.argv import option
from pinchpoint.collect.servers.files import read_text
from pinchpoint.discover.hops import add_next_hops
from pinchpoint.discover.listeners import tree_of
from pinchpoint.discover.tier import Tier
from pinchpoint.logformats import known_formats

# App servers a command line names after its interpreter (`python -m waitress`, a script),
# by the name their tier takes.
APP_SERVERS = {
    "uvicorn": "uvicorn",
    "hypercorn": "hypercorn",
    "daphne": "daphne",
    "granian": "granian",
    "waitress": "waitress",
    "waitress-serve": "waitress",
    "flask": "flask",
    "sanic": "sanic",
    "tornado": "tornado",
    "twistd": "twisted",
    "org.apache.catalina.startup.Bootstrap": "tomcat",
    "org.eclipse.jetty.start.Main": "jetty",
    "pm2": "pm2",
}
_PID_FILE_OPTIONS = ("--pidfile", "--pid-file", "--pid")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def read_unknown(pid: int, argv: list[str], exe: str, behind_proxy: bool) -> Tier:
    """The tier of the server whose main process is `pid`, running `exe` with `argv`:
    an app server when it is the first tier behind a proxy, else a service."""
    name = name_of(argv, exe)
    tier = Tier(name, "app_server" if behind_proxy else "service", pid)
    tier.notes.append(
        f"{name}: {Path(exe).name or 'a program'} running `{_shown(argv)}`, a server init "
        "has no reader for"
    )
    choose_processes(tier, argv)
    _next_hops(tier)
    formats = ", ".join(f for f in known_formats() if f != "probe")
    tier.warnings.append(
        f"{name}'s log is not known (init does not read its config): its processes are "
        "sampled, its time per request is not; add its access log as [component.log] "
        f'path = "..." and format = one of {formats}, or mount pinchpoint\'s probe in the '
        "app with PINCHPOINT_PROBE_LOG set"
    )
    return tier


def name_of(argv: list[str], exe: str) -> str:
    """The app server the command line names (`python -m uvicorn`, a `waitress-serve`
    script, Tomcat's main class), else the program's name without its minor version
    (python3.11 is python3)."""
    for arg in argv[:8]:
        base = os.path.basename(arg)
        for head in (base, base.removesuffix(".py"), base.split(":", 1)[0]):
            if head in APP_SERVERS:
                return APP_SERVERS[head]
    program = Path(exe or (argv[0] if argv else "server")).name
    return _NOT_NAME.sub("-", re.sub(r"\.\d+$", "", program)).strip("-") or "server"


def _shown(argv: list[str]) -> str:
    """The command line as a note shows it: its first words, never its values past them."""
    return " ".join(argv[:4])[:200] + (" …" if len(argv) > 4 else "")


def choose_processes(tier: Tier, argv: list[str]) -> None:
    """Its pid file where its command line names one holding its pid; else a name that
    selects its processes and no other; else its pid."""
    given = option(argv, _PID_FILE_OPTIONS)
    path = _in_cwd(tier.pid, given) if given is not None else None
    if path is not None and _pid_in(path) == tier.pid:
        tier.pid_file = path
        tier.notes.append(f"pid file {given}, from its command line")
        return
    tree = tree_of(tier.pid)
    for name in _names(tier.pid, argv):
        if set(ProcessSelector(name=name).select()) == tree:
            tier.process_name = name
            tier.notes.append(
                f"its processes: those named {name!r} and their children, {len(tree)} when read"
            )
            return
    tier.warnings.append(
        "no pid file, and its name is shared with other processes of this host: the plan "
        "names its pid, valid until it restarts"
    )


def _names(pid: int, argv: list[str]) -> list[str]:
    """The names the sampler matches it by: its process name, its command's file name."""
    try:
        comm = read_text(f"/proc/{pid}/comm", 64).strip()
    except OSError:
        comm = ""
    first = os.path.basename(argv[0]) if argv else ""
    return list(dict.fromkeys(n for n in (comm, first) if n))


def _in_cwd(pid: int, name: str) -> Path | None:
    """A path of its command line, relative to its working folder."""
    if os.path.isabs(name):
        return Path(name)
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) / name
    except OSError:
        return None


def _pid_in(path: Path) -> int | None:
    try:
        return int(read_text(path, 64).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _next_hops(tier: Tier) -> None:
    add_next_hops(tier)
