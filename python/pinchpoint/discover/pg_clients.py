"""Who the apps connect to PostgreSQL as: the user and database of its client backends,
from their process titles (`postgres: app shop 127.0.0.1(40312) idle`), so that the plan's
`[component.database]` can say the connection string to set, with no password in it."""

from __future__ import annotations

import re
from collections import Counter

import psutil

from pinchpoint.discover.tier import Address

# A client backend's title: an optional `cluster_name:`, then user, database, client.
_BACKEND = re.compile(
    r"^postgres: (?:\S+: )?(?P<user>\S+) (?P<database>\S+) (?P<client>\[local\]|\S+\(\d+\))"
)
# Titles of its own processes that look like a client's: not clients.
_OWN = ("wal", "autovacuum", "logical", "checkpointer", "background", "startup")


def clients(postmaster: int) -> Counter[tuple[str, str]]:
    """The (user, database) of each client backend of the postmaster, counted."""
    found: Counter[tuple[str, str]] = Counter()
    try:
        children = psutil.Process(postmaster).children()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return found
    for child in children:
        try:
            title = " ".join(child.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        match = _BACKEND.match(title)
        if match and not match["user"].startswith(_OWN):
            found[(match["user"], match["database"])] += 1
    return found


def example_dsn(postmaster: int, address: Address) -> str | None:
    """A libpq connection string to the server at the address the apps reached it by, as the
    user and database most of its clients use; None when no client is connected."""
    most = clients(postmaster).most_common(1)
    if not most:
        return None
    user, database = most[0][0]
    host = str(address.unix.parent) if address.unix is not None else address.host
    port = _socket_port(address) if address.unix is not None else address.port
    return f"host={host} port={port} user={user} dbname={database}"


def _socket_port(address: Address) -> str:
    """The port a unix socket's name carries (.s.PGSQL.5432)."""
    name = address.unix.name if address.unix is not None else ""
    return name.rsplit(".", 1)[-1] if name.startswith(".s.PGSQL.") else "5432"
