"""The request followed from a URL down the stack: the process listening on its port, what
that process is (by its program and command line), what its config says of the next hop,
and so on to the last tier on this host."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from pinchpoint.collect.servers.argv import runs
from pinchpoint.collect.servers.files import Owner, as_owner
from pinchpoint.collect.servers.node import is_node
from pinchpoint.collect.servers.php_fpm import is_php_fpm
from pinchpoint.collect.servers.tomcat import is_tomcat
from pinchpoint.discover.listeners import Sockets, root_of, tree_of
from pinchpoint.discover.otel import exports_traces, otel_of
from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.unknown import read_unknown

# A reader of one kind of server: its main process's pid and command line, the address the
# request reached it at and the URL's path, to its tier.
Reader = Callable[[int, list[str], Address, str], Tier]
# The most tiers followed: a config that sends requests in a circle ends.
MOST_TIERS = 16
# The one request sent before the sockets are read: how long it may take, how much is read.
TOUCH_TIMEOUT_S = 5.0
TOUCH_BYTES = 64 * 1024


@dataclass
class Discovery:
    """The tiers found in the order a request meets them, who calls whom, and what could not
    be followed."""

    url: str
    method: str = "GET"
    tiers: list[Tier] = field(default_factory=list)
    calls: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Hops nothing on this host listens at, with the tier that sends there (None: the URL
    # itself): another host's agent may serve them.
    leaves: list[tuple[str | None, Address]] = field(default_factory=list)
    # The agents tiers were found through (name: URL), and the variable holding their token.
    agents: dict[str, str] = field(default_factory=dict)
    token_env: str | None = None
    # The HTTP status the URL answered init's one request with; None: not sent, or no answer.
    status: int | None = None


# Programs that run other programs' code: what they run is known by their command line.
_INTERPRETERS = ("python", "pypy", "node", "java", "php", "ruby", "perl", "sh", "bash")


# The roles of tiers that run an app, whose processes' OTEL_* variables are read.
APP_ROLES = ("app_server", "service")
# Servers of ASGI apps known by their command line: an event loop in each process.
ASGI_SERVERS = ("uvicorn", "hypercorn", "daphne")


def kind_of(argv: list[str], exe: str = "") -> str | None:
    """Which server a process runs: nginx, haproxy, gunicorn, uwsgi, uvicorn, hypercorn,
    daphne, postgres, mysql (MariaDB too), redis, php-fpm, tomcat, node; None for anything else. A server with a
    program of its own is known by that program (/proc/PID/exe, `exe`), which its owner
    cannot rename as it can rename its title; only where the program is an interpreter, or
    cannot be read, is the command line read."""
    program = Path(exe).name.lower()
    if program.startswith("php-fpm"):  # PHP's FastCGI server, not the php interpreter
        return "php-fpm"
    if program and not program.startswith(_INTERPRETERS):
        return _by_program(program)
    first = Path(argv[0]).name.lower() if argv else ""
    if "gunicorn" in " ".join(argv[:3]).lower():
        return "gunicorn"
    for kind in ASGI_SERVERS:
        if runs(argv, kind):
            return kind
    if is_tomcat(argv) and (not program or program.startswith("java")):
        return "tomcat"
    if program in ("node", "nodejs") or (not program and is_node(argv)):
        return "node"
    if not program and is_php_fpm(argv):
        return "php-fpm"
    return _by_program(first) if not program else None


def _by_program(name: str) -> str | None:
    for kind, prefixes in (
        ("nginx", ("nginx",)),
        ("haproxy", ("haproxy",)),
        ("uwsgi", ("uwsgi",)),
        ("postgres", ("postgres", "postmaster")),
        ("mysql", ("mariadbd", "mysqld")),
        # Debian links redis-server to redis-check-rdb, which serves when so named.
        ("redis", ("redis-server", "redis-check-rdb")),
    ):
        if name.startswith(prefixes):
            return kind
    return None


def walk(
    url: str, readers: dict[str, Reader], sockets: Sockets | None = None, method: str = "GET"
) -> Discovery:
    """Follows the URL's request through every tier on this host that `readers` knows."""
    found = Discovery(url, method)
    start = address_of(url)
    if sockets is None:
        if Sockets.read().listener(start) is not None:
            touch(url, method, found)
        sockets = Sockets.read()
    follow(found, start, urlsplit(url).path or "/", readers, sockets)
    return found


def address_of(url: str) -> Address:
    """Where a request to the URL goes first."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Address(parts.hostname or "127.0.0.1", port)


def touch(url: str, method: str, found: Discovery) -> None:
    """Apps open their database connections at their first request: one request of the
    plan's own makes them show."""
    found.status, answer = _touch(url, method)
    found.notes.append(f"one {method} sent to the URL before reading connections: {answer}")
    if found.status is not None and found.status >= 400:
        found.problems.append(
            f"the URL answered {method} with status {found.status}: a run would measure "
            "its error answers, not the page; check the URL's path, method and host"
        )


def follow(
    found: Discovery, start: Address, path: str, readers: dict[str, Reader], sockets: Sockets
) -> None:
    """The tiers from `start` on, in the order a request meets them, into `found`."""
    todo: list[tuple[Address, Tier | None]] = [(start, None)]
    seen: dict[int, Tier] = {}
    while todo and len(seen) < MOST_TIERS:
        address, caller = todo.pop(0)
        tier = _tier_at(address, path, readers, sockets, seen, found, caller)
        if tier is None:
            if sockets.listener(address) is None:
                found.leaves.append((caller.name if caller else None, address))
            continue
        if caller is not None and tier.name not in found.calls.setdefault(caller.name, []):
            found.calls[caller.name].append(tier.name)
        if tier.pid in seen:
            continue
        seen[tier.pid] = tier
        innermost = _add(found, tier)
        todo.extend((hop, innermost) for hop in tier.next_hops)


def _add(found: Discovery, tier: Tier) -> Tier:
    """The tier and those inside it, each calling the next; the innermost, which sends the
    requests on."""
    found.tiers.append(tier)
    found.calls.setdefault(tier.name, [])
    for inner in tier.inside:
        inner.name = free_name(inner.name, found)
        found.calls[tier.name].append(inner.name)
        found.tiers.append(inner)
        found.calls.setdefault(inner.name, [])
        tier = inner
    return tier


def _tier_at(
    address: Address,
    path: str,
    readers: dict[str, Reader],
    sockets: Sockets,
    seen: dict[int, Tier],
    found: Discovery,
    caller: Tier | None = None,
) -> Tier | None:
    pid = sockets.listener(address)
    if pid is None:
        found.problems.append(f"nothing on this host listens at {address}")
        return None
    root = root_of(pid)
    if root in seen:
        return seen[root]
    try:
        argv = psutil.Process(root).cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied) as e:
        found.problems.append(f"{address}: process {root} cannot be read ({type(e).__name__})")
        return None
    exe = program_of(root)
    kind = kind_of(argv, exe)
    reader = readers.get(kind or "")
    # Its config and logs are read, and its binary run, with its owner's rights, never more.
    with as_owner(Owner.of_pid(root)):
        if reader is None:
            behind_proxy = caller is not None and caller.role == "proxy"
            tier = read_unknown(root, argv, exe, behind_proxy)
        else:
            tier = reader(root, argv, address, path)
        if tier.role in APP_ROLES:
            tier.otel = otel_of(tree_of(root))
            _named_for_service(tier)
    tier.name = free_name(tier.name, found)
    return tier


_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


def _named_for_service(tier: Tier) -> None:
    """An app server whose processes export spans is named for their service.name, as its
    spans name it: its log and its spans are then one tier."""
    service = tier.otel.get("OTEL_SERVICE_NAME", "")
    if exports_traces(tier.otel) and _NAME.match(service) and service != tier.name:
        tier.notes.append(f"named {service} for its OTEL_SERVICE_NAME: its spans name it so")
        tier.name = service


def program_of(pid: int) -> str:
    """The process's program (/proc/PID/exe); "" where it cannot be read."""
    try:
        return psutil.Process(pid).exe()
    except psutil.Error:
        return ""


def free_name(name: str, found: Discovery) -> str:
    """The name, numbered (nginx2, nginx3) where a tier found already has it."""
    taken = {t.name for t in found.tiers}
    if name not in taken:
        return name
    return f"{name}{sum(1 for n in taken if n.startswith(name)) + 1}"


def _touch(url: str, method: str) -> tuple[int | None, str]:
    """Sends one request to the URL (served on this host); its status (None: no answer) and
    what came back, in words."""
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TOUCH_TIMEOUT_S) as answer:
            answer.read(TOUCH_BYTES)
            return answer.status, f"status {answer.status}"
    except urllib.error.HTTPError as e:
        return e.code, f"status {e.code}"
    except (OSError, ValueError) as e:
        return None, f"no answer ({type(e).__name__})"
