"""Which process listens where, and which processes talk to which listener: the sockets of
this host, read once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psutil

from pinchpoint.discover.tier import Address

_LOOPBACK = ("127.0.0.1", "::1", "0.0.0.0", "::", "localhost")


@dataclass(frozen=True)
class Sockets:
    """Listening sockets by address (TCP by port, unix by path) and each process's
    established TCP connections' remote addresses (host, port)."""

    tcp: dict[int, int]
    unix: dict[Path, int]
    connected: dict[int, set[tuple[str, int]]]

    @classmethod
    def read(cls) -> Sockets:
        tcp: dict[int, int] = {}
        unix: dict[Path, int] = {}
        connected: dict[int, set[tuple[str, int]]] = {}
        for conn in psutil.net_connections(kind="all"):
            if conn.pid is None:
                continue
            if conn.status == psutil.CONN_LISTEN and conn.laddr:
                tcp.setdefault(conn.laddr.port, conn.pid)
            elif conn.status == psutil.CONN_ESTABLISHED and conn.raddr:
                connected.setdefault(conn.pid, set()).add((conn.raddr.ip, conn.raddr.port))
            elif isinstance(conn.laddr, str) and conn.laddr and conn.status == psutil.CONN_NONE:
                unix.setdefault(Path(conn.laddr), conn.pid)
        return cls(tcp, unix, connected)

    def listener(self, address: Address) -> int | None:
        """The pid listening at the address on this host; None when none does (or the host
        is another)."""
        if address.unix is not None:
            return self.unix.get(address.unix)
        if address.host is not None and address.host not in _LOOPBACK and not _local(address.host):
            return None
        return self.tcp.get(address.port) if address.port is not None else None

    def called_by(self, pids: set[int]) -> list[Address]:
        """The listeners on this host that these processes hold connections to, other than
        their own, by port: where a server's workers send requests on."""
        found: dict[int, Address] = {}
        for pid in pids:
            for host, port in self.connected.get(pid, ()):
                listener = self.listener(Address(host, port))
                if listener is not None and listener not in pids:
                    found.setdefault(port, Address(host, port))
        return [found[port] for port in sorted(found)]


def _local(host: str) -> bool:
    addrs = {a.address for nic in psutil.net_if_addrs().values() for a in nic}
    return host in addrs


def tree_of(pid: int) -> set[int]:
    """The process and all its descendants (a master and its workers); {pid} when it is
    gone."""
    try:
        return {pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))}
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {pid}


def root_of(pid: int) -> int:
    """The topmost ancestor running the same server: a pre-fork master above its workers
    (same program and command line, or a title saying it is the master)."""
    try:
        proc = psutil.Process(pid)
        parent = proc.parent()
        while parent is not None and _same_server(proc, parent):
            proc, parent = parent, parent.parent()
        return proc.pid
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return pid


def _same_server(child: psutil.Process, parent: psutil.Process) -> bool:
    if parent.name() != child.name():
        return False
    title = parent.cmdline()
    return title == child.cmdline() or "master" in " ".join(title[:3])
