"""The sockets of a component's processes: the accept backlog of its listening sockets and
its established TCP connections (Linux).

A process's sockets are the `socket:[<inode>]` links in /proc/<pid>/fd. For a listening
socket the kernel counts the connections whose handshake is done and that the program has
not accept()ed yet — its accept backlog, what `ss -ltn` shows as Recv-Q — and the most it
may hold (the `listen()` backlog, `ss`'s Send-Q). Requests waiting there for a free worker
are the evidence of a full worker pool. A pre-fork server's workers share the master's
listening socket, so sockets are counted once per inode.

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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Socket:
    """A listening or established socket: its state, its queue (for a listening one, the
    accept backlog) and the maximum backlog of a listening one (None: not known)."""

    state: int
    queue: int
    max_backlog: int | None = None
    tcp: bool = True


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


def proc_tcp_table(text: str) -> dict[int, Socket]:
    """The listening and established sockets of /proc/net/tcp (or tcp6) text, by inode."""
    table = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            state = int(fields[3], 16)
            rx_queue = int(fields[4].partition(":")[2], 16)
            inode = int(fields[9])
        except ValueError:
            continue
        if inode and state in (LISTEN, ESTABLISHED):
            table[inode] = Socket(state, rx_queue)
    return table


def netlink_table() -> dict[int, Socket]:
    """This network namespace's listening and established TCP sockets and its listening
    unix-domain sockets, by inode, from sock_diag. Raises OSError when refused."""
    table = {}
    states = (1 << LISTEN) | (1 << ESTABLISHED)
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        for family in (socket.AF_INET, socket.AF_INET6):
            # inet_diag_req_v2: family, protocol, extensions, pad, states, a zero sockid.
            request = struct.pack("=BBBxI48x", family, socket.IPPROTO_TCP, 0, states)
            for msg in _dump(nl, request):
                # inet_diag_msg: family, state, ..., rqueue, wqueue, uid, inode at 56.
                rqueue, wqueue, _uid, inode = struct.unpack_from("=IIII", msg, 56)
                state = msg[1]
                table[inode] = Socket(state, rqueue, wqueue if state == LISTEN else None)
        # unix_diag_req: family, protocol, pad, states, inode, show, cookie.
        request = struct.pack(
            "=BBxxIIIQ", socket.AF_UNIX, 0, 1 << LISTEN, 0, _UDIAG_SHOW_RQLEN, 2**64 - 1
        )
        for msg in _dump(nl, request):
            inode = struct.unpack_from("=I", msg, 4)[0]
            queues = _attribute(msg, 16, _UNIX_DIAG_RQLEN)
            if msg[2] == LISTEN and queues is not None and len(queues) >= 8:
                backlog, most = struct.unpack_from("=II", queues)
                table[inode] = Socket(LISTEN, backlog, most, tcp=False)
    return table


def _dump(nl: socket.socket, request: bytes) -> list[bytes]:
    """The payloads of the answers to one sock_diag dump request."""
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_DUMP_REQUEST, 1, 0
    )
    nl.sendto(header + request, (0, 0))
    out = []
    while True:
        data = nl.recv(1 << 16)
        if not data:
            raise OSError("sock_diag: connection closed")
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind == _NLMSG_DONE:
                return out
            if kind == _NLMSG_ERROR:
                code = -struct.unpack_from("=i", data, offset + 16)[0]
                raise OSError(code, f"sock_diag: {os.strerror(code)}")
            if length < 16:
                raise OSError("sock_diag: malformed answer")
            out.append(data[offset + 16 : offset + length])
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
    """Reads the socket tables once per sample and network namespace, for every component."""

    def __init__(self, proc: Path = PROC, netlink: bool = True) -> None:
        self._proc = proc
        self._netlink = netlink
        self._own = _namespace(proc, "self")
        self._tables: dict[str, dict[int, Socket]] = {}

    def new_sample(self) -> None:
        """Forgets the tables read for the previous sample."""
        self._tables = {}

    def read(self, pids: list[int]) -> dict[str, int | None]:
        """The `listen_backlog`, `listen_backlog_limit` and `connections` columns of one
        component's processes; None when none of their fds could be read (the maximum also
        when no listening socket's is known)."""
        inodes: set[int] = set()
        readable = None
        for pid in pids:
            own = socket_inodes(pid, self._proc)
            if own is not None:
                inodes |= own
                readable = readable if readable is not None else pid
        if readable is None:
            return dict.fromkeys(("listen_backlog", "listen_backlog_limit", "connections"))
        table = self._table(readable) if inodes else {}
        backlog = connections = 0
        most: int | None = None
        for inode in inodes:
            sock = table.get(inode)
            if sock is None:
                continue
            if sock.state == LISTEN:
                backlog += sock.queue
                if sock.max_backlog is not None:
                    most = (most or 0) + sock.max_backlog
            elif sock.tcp:
                connections += 1
        return {"listen_backlog": backlog, "listen_backlog_limit": most, "connections": connections}

    def _table(self, pid: int) -> dict[int, Socket]:
        """The sockets of the network namespace the process is in."""
        # Cannot tell: read as its own namespace.
        namespace = _namespace(self._proc, str(pid)) or f"pid {pid}"
        table = self._tables.get(namespace)
        if table is not None:
            return table
        table = None
        if self._netlink and namespace == self._own:
            try:
                table = netlink_table()
            except OSError:
                self._netlink = False  # refused here: /proc from now on
        if table is None:
            table = {}
            for name in ("tcp", "tcp6"):
                try:
                    table.update(proc_tcp_table((self._proc / str(pid) / "net" / name).read_text()))
                except OSError:
                    continue
        self._tables[namespace] = table
        return table


def _namespace(proc: Path, pid: str) -> str | None:
    try:
        return os.readlink(f"{proc}/{pid}/ns/net")
    except OSError:
        return None
