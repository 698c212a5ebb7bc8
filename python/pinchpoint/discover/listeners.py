"""Which process listens where, and which processes talk to which listener: the sockets of
this host, read once."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from pinchpoint.collect.servers.argv import runs
from pinchpoint.discover.tier import Address

_LOOPBACK = ("127.0.0.1", "::1", "0.0.0.0", "::", "localhost")
_PIDS = re.compile(r"pid=(\d+)")
SS_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Sockets:
    """Listening sockets by address (TCP by port, unix by path), each process's established
    TCP connections' remote addresses (host, port), and the paths of the unix sockets its
    connections reach (a database's socket, such as /run/postgresql/.s.PGSQL.5432)."""

    tcp: dict[int, int]
    unix: dict[Path, int]
    connected: dict[int, set[tuple[str, int]]]
    unix_connected: dict[int, set[Path]] = field(default_factory=dict)

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
        listening, peers = unix_sockets()
        # ss tells a listening unix socket from an accepted one, psutil does not.
        return cls(tcp, listening if listening else unix, connected, peers)

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
        found: dict[str, Address] = {}
        for pid in pids:
            hops = [Address(host, port) for host, port in self.connected.get(pid, ())]
            hops += [Address(unix=path) for path in self.unix_connected.get(pid, ())]
            for hop in hops:
                listener = self.listener(hop)
                if listener is not None and listener not in pids:
                    found.setdefault(_key(hop), hop)
        return [found[key] for key in sorted(found)]


def _key(address: Address) -> str:
    """TCP hops by port number, then unix sockets by path."""
    return f"1{address.unix}" if address.unix is not None else f"0{address.port:05d}"


def unix_sockets() -> tuple[dict[Path, int], dict[int, set[Path]]]:
    """The listening unix sockets by path (to their first process), and per process the
    paths of the unix sockets its connections reach, from `ss` ({} and {} without it): the
    kernel gives a client's socket no path, only its peer's inode, whose socket (the one
    the server accepted) carries the path."""
    try:
        done = subprocess.run(
            ["ss", "-xapnH"], capture_output=True, text=True, timeout=SS_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return {}, {}
    listening: dict[Path, int] = {}
    path_of: dict[str, Path] = {}
    clients: list[tuple[str, list[int]]] = []
    for line in done.stdout.splitlines():
        words = line.split()
        if len(words) < 8:
            continue
        local, inode, peer_inode = words[4], words[5], words[7]
        pids = [int(p) for p in _PIDS.findall(line)]
        if words[1] == "LISTEN" and local != "*" and pids:
            listening.setdefault(Path(local), pids[0])
        elif words[1] == "ESTAB" and local != "*":
            path_of[inode] = Path(local)
        elif words[1] == "ESTAB":
            clients.append((peer_inode, pids))
    peers: dict[int, set[Path]] = {}
    for peer, pids in clients:
        if peer in path_of:
            for pid in pids:
                peers.setdefault(pid, set()).add(path_of[peer])
    return listening, peers


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
    if _spawned(child.cmdline()) and any(runs(title, s) for s in _SPAWNING_SERVERS):
        return True
    return title == child.cmdline() or "master" in " ".join(title[:3])


# Servers whose workers are started by multiprocessing's spawn, under a command line of its
# own (`python -c "from multiprocessing.spawn import spawn_main; ..."`).
_SPAWNING_SERVERS = ("uvicorn", "hypercorn")


def _spawned(argv: list[str]) -> bool:
    return "--multiprocessing-fork" in argv or "multiprocessing.spawn" in " ".join(argv[:3])
