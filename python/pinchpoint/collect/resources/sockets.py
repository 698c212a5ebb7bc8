"""The sockets of a component's processes: the accept backlog of its listening sockets and
the connections it has accepted on them (Linux).

A process's sockets are the `socket:[<inode>]` links in /proc/<pid>/fd. For a listening
socket the kernel counts the connections whose handshake is done and that the program has
not accept()ed yet — its accept backlog, what `ss -ltn` shows as Recv-Q — and the most it
may hold (the `listen()` backlog, `ss`'s Send-Q). Requests waiting there for a free worker
are the evidence of a full worker pool. A pre-fork server's workers share the master's
listening socket, so sockets are counted once per inode.

A component's connections are the established TCP connections on the ports it listens on
that a process has accepted (those still in the backlog are not): the clients it serves
right now, idle keep-alive ones included. Connections it opens itself (a proxy's to its
upstream) are the upstream's connections, not its own.

The socket tables are asked of the kernel as `ss` does (netlink sock_diag: TCP over IPv4
and IPv6, listening and established, and listening unix-domain sockets, each with its
backlog and maximum) once per sample for all components. Processes in another network
namespace, or a kernel that refuses sock_diag, are read from /proc/<pid>/net/tcp and tcp6
instead: there a listening socket's `rx_queue` is its backlog, the maximum is not given,
and unix-domain sockets are not counted. Those files are slow to read (the kernel walks
its whole connection hash table), hence netlink first.
"""

from __future__ import annotations

import os
import socket
import struct
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
LISTEN = 10  # TCP_LISTEN, also the state of a listening unix-domain socket
ESTABLISHED = 1

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_DUMP_REQUEST = 0x301  # NLM_F_REQUEST | NLM_F_DUMP
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_UDIAG_SHOW_RQLEN = 0x10
_UNIX_DIAG_RQLEN = 4
_PORT = struct.Struct(">H")
_QUEUES = struct.Struct("=IIII")


@dataclass(frozen=True)
class Listener:
    """A listening socket: connections waiting in its accept queue, the most it may hold
    (None: not known), and its TCP port (None: a unix-domain socket)."""

    backlog: int
    limit: int | None
    port: int | None


@dataclass
class SocketTable:
    """A network namespace's listening sockets by inode, and its established TCP sockets
    that a process holds (accepted or connected, not waiting in a backlog) by local port."""

    listening: dict[int, Listener] = field(default_factory=dict)
    held: Counter[int] = field(default_factory=Counter)


def socket_inodes(pid: int, proc: Path = PROC) -> set[int] | None:
    """The inodes of the sockets a process holds open; None when its fds cannot be read
    (another user's process, or gone)."""
    folder = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    inodes = set()
    for name in names:
        try:
            target = os.readlink(f"{folder}/{name}")
        except OSError:  # closed since listed
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def proc_tcp_table(text: str, table: SocketTable | None = None) -> SocketTable:
    """Adds the listening and established sockets of /proc/net/tcp (or tcp6) text."""
    table = SocketTable() if table is None else table
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            state = int(fields[3], 16)
            port = int(fields[1].rpartition(":")[2], 16)
            rx_queue = int(fields[4].partition(":")[2], 16)
            inode = int(fields[9])
        except ValueError:
            continue
        if state == LISTEN and inode:
            table.listening[inode] = Listener(rx_queue, None, port)
        elif state == ESTABLISHED and inode:
            table.held[port] += 1
    return table


def netlink_table() -> SocketTable:
    """This network namespace's listening TCP and unix-domain sockets and its established
    TCP sockets, from sock_diag. Raises OSError when refused."""
    table = SocketTable()
    states = (1 << LISTEN) | (1 << ESTABLISHED)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        for family in (socket.AF_INET, socket.AF_INET6):
            # inet_diag_req_v2: family, protocol, extensions, pad, states, a zero sockid.
            request = struct.pack("=BBBxI48x", family, socket.IPPROTO_TCP, 0, states)
            for data, at, _end in _dump(nl, request):
                # inet_diag_msg: family, state, timer, retrans, then the socket id (source
                # port big-endian at 4), ..., rqueue, wqueue, uid, inode at 56.
                (port,) = _PORT.unpack_from(data, at + 4)
                rqueue, wqueue, _uid, inode = _QUEUES.unpack_from(data, at + 56)
                if data[at + 1] == LISTEN:
                    table.listening[inode] = Listener(rqueue, wqueue, port)
                elif inode:
                    table.held[port] += 1
        # unix_diag_req: family, protocol, pad, states, inode, show, cookie.
        request = struct.pack(
            "=BBxxIIIQ", socket.AF_UNIX, 0, 1 << LISTEN, 0, _UDIAG_SHOW_RQLEN, 2**64 - 1
        )
        for data, at, end in _dump(nl, request):
            msg = data[at:end]
            inode = struct.unpack_from("=I", msg, 4)[0]
            queues = _attribute(msg, 16, _UNIX_DIAG_RQLEN)
            if msg[2] == LISTEN and queues is not None and len(queues) >= 8:
                backlog, most = struct.unpack_from("=II", queues)
                table.listening[inode] = Listener(backlog, most, None)
    return table


def _dump(nl: socket.socket, request: bytes) -> Iterator[tuple[bytes, int, int]]:
    """The answers to one sock_diag dump request: each as the buffer it is in and where
    its payload starts and ends (a thousand connections give a thousand answers: they are
    not copied out)."""
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, 1, 0
    )
    nl.sendto(header + request, (0, 0))
    while True:
        data = nl.recv(1 << 18)
        if not data:
            raise OSError("sock_diag: connection closed")
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind == _NLMSG_DONE:
                return
            if kind == _NLMSG_ERROR:
                code = -struct.unpack_from("=i", data, offset + 16)[0]
                raise OSError(code, f"sock_diag: {os.strerror(code)}")
            if length < 16:
                raise OSError("sock_diag: malformed answer")
            yield data, offset + 16, offset + length
            offset += (length + 3) & ~3


def _attribute(msg: bytes, offset: int, kind: int) -> bytes | None:
    """The payload of the netlink attribute `kind` after `offset`, or None."""
    while offset + 4 <= len(msg):
        length, found = struct.unpack_from("=HH", msg, offset)
        if length < 4:
            return None
        if found == kind:
            return msg[offset + 4 : offset + length]
        offset += (length + 3) & ~3
    return None


class SocketReader:
    """Reads the socket tables once per sample and network namespace, for every component.

    Which listening sockets a process holds is learnt from its fds, a walk that costs with
    every connection it has open; it is done when the process is first seen and when the
    namespace's set of listening sockets changed since the previous sample — otherwise no
    process can hold a listening socket it did not hold before."""

    def __init__(self, proc: Path = PROC, netlink: bool = True) -> None:
        self._proc = proc
        self._netlink = netlink
        self._own = _namespace(proc, "self")
        self._tables: dict[str, SocketTable] = {}
        self._changed: dict[str, bool] = {}
        self._listening: dict[str, set[int]] = {}  # at the previous sample
        # pid -> its start and the listening sockets it holds (None: fds not readable).
        self._holds: dict[int, tuple[float, frozenset[int] | None]] = {}
        self._read: set[int] = set()

    def new_sample(self) -> None:
        """Forgets the tables of the previous sample, and processes no longer read."""
        self._tables, self._changed = {}, {}
        self._holds = {pid: v for pid, v in self._holds.items() if pid in self._read}
        self._read = set()

    def read(self, procs: Mapping[int, float]) -> dict[str, int | None]:
        """The `listen_backlog`, `listen_backlog_limit` and `connections` columns of one
        component's processes (pid: start time): connections waiting in the accept queues
        of their listening sockets, the most those may hold, and the established TCP
        connections to their listening ports that a process took; all None when none of
        their fds could be read (the limit also when no listening socket's is known)."""
        empty = dict.fromkeys(("listen_backlog", "listen_backlog_limit", "connections"))
        if not procs:
            return empty
        first = next(iter(procs))
        namespace = _namespace(self._proc, str(first)) or f"pid {first}"
        table = self._table(namespace, first)
        held: set[int] = set()
        readable = False
        for pid, start in procs.items():
            self._read.add(pid)
            known = self._holds.get(pid)
            if known is None or known[0] != start or self._changed[namespace]:
                inodes = socket_inodes(pid, self._proc)
                listening = None if inodes is None else frozenset(inodes & table.listening.keys())
                known = self._holds[pid] = (start, listening)
            if known[1] is not None:
                readable = True
                held |= known[1]
        if not readable:
            return empty
        listeners = [table.listening[inode] for inode in held if inode in table.listening]
        limits = [listener.limit for listener in listeners if listener.limit is not None]
        ports = {listener.port for listener in listeners if listener.port is not None}
        return {
            "listen_backlog": sum(listener.backlog for listener in listeners),
            "listen_backlog_limit": sum(limits) if limits else None,
            "connections": sum(table.held[port] for port in ports),
        }

    def _table(self, namespace: str, pid: int) -> SocketTable:
        """The sockets of a network namespace, read through a process in it."""
        table = self._tables.get(namespace)
        if table is not None:
            return table
        if self._netlink and namespace == self._own:
            try:
                table = netlink_table()
            except OSError:
                self._netlink = False  # refused here: /proc from now on
        if table is None:
            table = SocketTable()
            for name in ("tcp", "tcp6"):
                try:
                    proc_tcp_table((self._proc / str(pid) / "net" / name).read_text(), table)
                except OSError:
                    continue
        listening = set(table.listening)
        self._changed[namespace] = listening != self._listening.get(namespace)
        self._listening[namespace] = listening
        self._tables[namespace] = table
        return table


def _namespace(proc: Path, pid: str) -> str | None:
    try:
        return os.readlink(f"{proc}/{pid}/ns/net")
    except OSError:
        return None
