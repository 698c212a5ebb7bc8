"""Where an app's processes send requests on: the listeners on this host they hold
connections to, and, where they hold none when read (a client that connects per request,
a server that closes each connection), the local listeners their own environment names
(`SHIPPING_URL=http://127.0.0.1:8001/`, `DATABASE_URL=postgresql://…@127.0.0.1:5432/db`).

The environment is read as the process's owner reads it (files.read_bytes, with the rights
of the process inspected), and only each variable's name and the host and port its value
names are kept: never a value, which may hold a password.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pinchpoint.collect.servers import files
from pinchpoint.discover.listeners import Sockets, tree_of
from pinchpoint.discover.tier import Address, Tier

MOST_ENVIRON_BYTES = 256 * 1024
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_DEFAULT_PORTS = {
    "http": 80, "https": 443, "postgres": 5432, "postgresql": 5432, "redis": 6379,
    "mysql": 3306, "mariadb": 3306, "amqp": 5672, "grpc": 443, "ws": 80, "wss": 443,
}  # fmt: skip


def add_next_hops(tier: Tier, what: str = "processes") -> None:
    """The tier's next hops: the listeners its processes hold connections to, else those
    its environment names, each with a note saying how it was found."""
    sockets = Sockets.read()
    pids = tree_of(tier.pid)
    tier.next_hops = sockets.called_by(pids)
    for hop in tier.next_hops:
        tier.notes.append(f"calls {hop}: its {what} hold connections to it")
    if tier.next_hops:
        return
    for name, hop in named_by_environment(tier.pid, sockets, pids):
        tier.next_hops.append(hop)
        tier.notes.append(
            f"calls {hop}: its environment's {name} names it (no connection held when read)"
        )


def named_by_environment(pid: int, sockets: Sockets, own: set[int]) -> list[tuple[str, Address]]:
    """The listeners on this host, other than the process's own, that a URL in its
    environment names: each variable's name and the address."""
    try:
        raw = files.read_bytes(f"/proc/{pid}/environ", MOST_ENVIRON_BYTES)
    except OSError:
        return []
    found: dict[Address, str] = {}
    for entry in raw[:MOST_ENVIRON_BYTES].split(b"\0"):
        name, _, value = entry.decode(errors="replace").partition("=")
        address = _address(value.strip())
        if address is None or address in found:
            continue
        listener = sockets.listener(address)
        if listener is not None and listener not in own:
            found[address] = name
    return [(name, address) for address, name in found.items()]


def _address(value: str) -> Address | None:
    if not _URL.match(value):
        return None
    try:
        parts = urlsplit(value)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return None
    if parts.hostname is None or port is None:
        return None
    return Address(parts.hostname, port)
