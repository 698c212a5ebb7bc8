"""A WebSocket the server closes before it answers: the session fails as `closed`, and the
run's reasons keep the server's close code and reason (a server on loopback, wsproto)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Request

from pinchpoint_cli import pinchpoint

PLAN = (
    '[target]\nurl = "http://127.0.0.1:{port}"\n\n'
    '[load]\nusers = 1\nduration = "1s"\nwarmup = "0s"\n\n'
    '[[flow]]\nname = "chat"\n\n[[flow.step]]\nname = "room"\nws = "/ws"\n\n'
    '[[flow.step.message]]\nname = "hello"\nsend = "hello"\n'
)


def _session(conn: socket.socket, code: int | None, reason: str) -> None:
    """Accepts the upgrade, then closes at the first message with `code` and `reason`
    (None: the connection ends with no close frame)."""
    ws = WSConnection(ConnectionType.SERVER)
    with conn:
        conn.settimeout(5)
        while True:
            data = conn.recv(65536)
            if not data:
                return
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, Request):
                    conn.sendall(ws.send(AcceptConnection()))
                elif isinstance(event, Message):
                    if code is not None:
                        conn.sendall(ws.send(CloseConnection(code=code, reason=reason)))
                    return
                elif isinstance(event, CloseConnection):
                    return


@contextmanager
def _closing_server(code: int | None, reason: str = "") -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_session, args=(conn, code, reason), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def _load(tmp_path: Path, port: int) -> dict:
    (tmp_path / "plan.toml").write_text(PLAN.format(port=port))
    done = pinchpoint(tmp_path, "load", "plan.toml", "--json", timeout=60, columns=300)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_the_server_s_close_code_and_reason_are_kept(tmp_path: Path) -> None:
    with _closing_server(1011, "database down") as port:
        summary = _load(tmp_path, port)
    kinds = summary["kinds"]
    assert kinds["ws_message"]["failed"] == kinds["ws_message"]["requests"] > 0
    # Every session is closed at its message, but for one the run's end may cut between
    # its upgrade and its message.
    assert kinds["ws_session"]["requests"] - kinds["ws_session"]["failed"] in (0, 1)
    assert summary["errors"] == {
        "closed": kinds["ws_session"]["failed"] + kinds["ws_message"]["failed"]
    }
    assert summary["error_reasons"]["closed"] == [
        "the server closed the WebSocket before a frame came: code 1011 (database down)"
    ]


def test_a_close_without_a_reason_gives_its_code_and_a_cut_says_it_had_no_close(
    tmp_path: Path,
) -> None:
    with _closing_server(1008) as port:
        coded = _load(tmp_path, port)
    with _closing_server(None) as port:
        cut = _load(tmp_path, port)
    assert coded["error_reasons"]["closed"] == [
        "the server closed the WebSocket before a frame came: code 1008"
    ]
    assert cut["error_reasons"] == {
        "io": ["WebSocket: WebSocket protocol error: Connection reset without closing handshake"]
    }
