"""The accept backlog and accepted connections of a component, on real sockets."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.collect.resources.sockets import Listener, SocketReader, proc_tcp_table
from pinchpoint_lab.waits import until

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux /proc"),
]

# Listens with a backlog of argv[1] and never accepts; with argv[2] == "fork", a child
# holds the same listening socket too, as a pre-fork server's workers do.
_DEAF = textwrap.dedent(
    """
    import os, socket, sys, time
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(int(sys.argv[1]))
    if sys.argv[2] == "fork" and os.fork() == 0:
        time.sleep(60)
        os._exit(0)
    print(server.getsockname()[1], flush=True)
    sys.stdin.read()
    """
)
# Accepts every connection and keeps it open.
_HOLDING = textwrap.dedent(
    """
    import socket, sys
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print(server.getsockname()[1], flush=True)
    kept = []
    while True:
        kept.append(server.accept()[0])
    """
)
# Opens argv[2] connections to port argv[1] and keeps them.
_CLIENT = textwrap.dedent(
    """
    import socket, sys
    kept = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]
    print("connected", flush=True)
    sys.stdin.read()
    """
)
# Listens on a unix-domain socket at argv[1] with a backlog of argv[2], never accepts.
_DEAF_UNIX = textwrap.dedent(
    """
    import socket, sys
    server = socket.socket(socket.AF_UNIX)
    server.bind(sys.argv[1])
    server.listen(int(sys.argv[2]))
    print("ready", flush=True)
    sys.stdin.read()
    """
)


class Spawned:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def __call__(self, script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
        """Starts a script in its own process group; returns it and its first line."""
        proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        return proc, proc.stdout.readline().strip()


@pytest.fixture
def spawn() -> Iterator[Spawned]:
    spawned = Spawned()
    yield spawned
    for proc in spawned.procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def connect(port: int, count: int) -> list[socket.socket]:
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]
    time.sleep(0.1)  # the handshakes' last ACKs reach the listener
    return clients


def _accepted(pid: int) -> int:
    """The connections the process has accepted and holds."""
    return sum(
        conn.status == psutil.CONN_ESTABLISHED
        for conn in psutil.Process(pid).net_connections(kind="tcp")
    )


def _server_rows(rows: list[dict]) -> list[dict]:
    return [row for row in rows if row["component"] == "server"]


def sample(targets: dict[str, ProcessSelector], seconds: float = 0.45) -> list[dict]:
    with ResourceSampler(targets, interval_s=0.1) as sampler:
        time.sleep(seconds)
    return sampler.rows()


def last(rows: list[dict], component: str) -> dict:
    return [row for row in rows if row["component"] == component][-1]


def test_connections_a_listener_does_not_accept_are_its_backlog(spawn: Spawned) -> None:
    server, port = spawn(_DEAF, "16", "no")
    clients = connect(int(port), 5)
    try:
        rows = sample({"server": ProcessSelector(pids=(server.pid,))})
    finally:
        for client in clients:
            client.close()
    row = last(rows, "server")
    assert row["listen_backlog"] == 5
    assert row["listen_backlog_limit"] == 16
    assert row["connections"] == 0  # none accepted
    # The test process holds the client ends, on no port it listens on.
    assert last(rows, "generator")["connections"] == 0


def test_the_proc_files_give_the_same_backlog_without_its_limit(spawn: Spawned) -> None:
    server, port = spawn(_DEAF, "16", "no")
    clients = connect(int(port), 3)
    try:
        from_proc = SocketReader(netlink=False).read({server.pid: 0.0})
        from_netlink = SocketReader().read({server.pid: 0.0})
    finally:
        for client in clients:
            client.close()
    assert from_proc == {"listen_backlog": 3, "listen_backlog_limit": None, "connections": 0}
    assert from_netlink == {"listen_backlog": 3, "listen_backlog_limit": 16, "connections": 0}


def test_a_listening_socket_shared_by_workers_counts_once(spawn: Spawned) -> None:
    server, port = spawn(_DEAF, "8", "fork")
    clients = connect(int(port), 4)
    try:
        rows = sample({"server": ProcessSelector(pids=(server.pid,))})
    finally:
        for client in clients:
            client.close()
    row = last(rows, "server")
    assert row["processes"] == 2
    assert (row["listen_backlog"], row["listen_backlog_limit"]) == (4, 8)


def test_accepted_connections_are_counted_and_the_backlog_drains(spawn: Spawned) -> None:
    server, port = spawn(_HOLDING)
    client, line = spawn(_CLIENT, port, "7")
    assert line == "connected"
    assert until(lambda: _accepted(server.pid) == 7)  # however late the server runs
    targets = {
        "server": ProcessSelector(pids=(server.pid,)),
        "client": ProcessSelector(pids=(client.pid,)),
    }
    with ResourceSampler(targets, interval_s=0.1) as sampler:
        assert until(lambda: _server_rows(sampler.rows()))  # however late its thread runs
        more, line = spawn(_CLIENT, port, "4")
        assert line == "connected"
        assert until(lambda: any(row["connections"] == 11 for row in _server_rows(sampler.rows())))
        more.kill()
        more.wait(timeout=10)
        time.sleep(0.35)
    server_rows = _server_rows(sampler.rows())
    assert server_rows[0]["connections"] == 7
    assert max(row["connections"] for row in server_rows) == 11
    # It accepts at once: nothing waits once the connections are in (in between, a sample
    # may catch one arriving).
    assert server_rows[0]["listen_backlog"] == server_rows[-1]["listen_backlog"] == 0
    # The killed client closed its ends: the server's wait in CLOSE_WAIT, not established.
    assert server_rows[-1]["connections"] == 7
    client_row = last(sampler.rows(), "client")
    assert client_row["connections"] == 0  # what it opened is the server's
    assert (client_row["listen_backlog"], client_row["listen_backlog_limit"]) == (0, None)


def test_unix_domain_listener_backlog(spawn: Spawned, tmp_path: Path) -> None:
    path = str(tmp_path / "app.sock")
    server, line = spawn(_DEAF_UNIX, path, "8")
    assert line == "ready"
    clients = []
    for _ in range(3):
        client = socket.socket(socket.AF_UNIX)
        client.connect(path)
        clients.append(client)
    try:
        row = SocketReader().read({server.pid: 0.0})
    finally:
        for client in clients:
            client.close()
    assert row == {"listen_backlog": 3, "listen_backlog_limit": 8, "connections": 0}


def test_unreadable_fds_give_nulls() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    empty = dict.fromkeys(("listen_backlog", "listen_backlog_limit", "connections"))
    assert SocketReader().read({gone.pid: 0.0}) == empty
    assert SocketReader().read({}) == empty


def test_proc_net_tcp_lines_are_parsed() -> None:
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
        "   uid  timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000005 00:00000000 00000000"
        "     0        0 4242 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000"
        "     0        0 4343 1 0000000000000000 20 4 30 10 -1\n"
        "   2: 0100007F:1F90 0100007F:D2F2 06 00000000:00000000 03:00000F2B 00000000"
        "     0        0 0 3 0000000000000000\n"
        "   3: garbled\n"
    )
    table = proc_tcp_table(text)
    assert table.listening == {4242: Listener(5, None, 8080)}
    assert dict(table.held) == {8080: 1}  # the TIME_WAIT one is not


def test_a_listener_opened_later_is_found(spawn: Spawned) -> None:
    """Processes' fds are walked again when the set of listening sockets changes."""
    reader = SocketReader()
    me = {os.getpid(): 0.0}
    reader.new_sample()
    assert reader.read(me)["listen_backlog_limit"] is None
    server = socket.create_server(("127.0.0.1", 0), backlog=9)
    try:
        reader.new_sample()
        assert reader.read(me)["listen_backlog_limit"] == 9
        reader.new_sample()
        assert reader.read(me)["listen_backlog_limit"] == 9  # from what was learnt
    finally:
        server.close()
    reader.new_sample()
    assert reader.read(me)["listen_backlog_limit"] is None
