"""A real WebSocket server (an ASGI echo under uvicorn) that refuses every fifth upgrade
and answers every tenth message wrong: `pinchpoint load`'s summary counts the sessions
and the messages apart, each with its own failures, equal to what the server did."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from pinchpoint_cli import pinchpoint

# A closed loop as fast as a local server answers: with the timed tests.
pytestmark = pytest.mark.timed

REFUSE_EVERY = 5
WRONG_EVERY = 10
PLAN = """
[target]
url = "http://127.0.0.1:PORT"

[load]
users = 3
duration = "1.5s"
warmup = "0s"
think_time = "5ms"

[[request]]
ws = "/echo"
message = [
    { send = "one", check = { contains = "one" } },
    { send = "two", check = { contains = "two" } },
    { send = "three", check = { contains = "three" } },
]
"""


@dataclass
class Echo:
    """Echoes each text frame; refuses every REFUSE_EVERY-th upgrade (HTTP 403) and
    answers every WRONG_EVERY-th message "wrong"."""

    upgrades: int = 0
    refused: int = 0
    messages: int = 0
    wrong: int = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "websocket", scope["type"]
        await receive()  # websocket.connect
        self.upgrades += 1
        if self.upgrades % REFUSE_EVERY == 0:
            self.refused += 1
            await send({"type": "websocket.close", "code": 1008})
            return
        await send({"type": "websocket.accept"})
        while (event := await receive())["type"] == "websocket.receive":
            self.messages += 1
            wrong = self.messages % WRONG_EVERY == 0
            self.wrong += wrong
            await send({"type": "websocket.send", "text": "wrong" if wrong else event["text"]})


@pytest.fixture
def echo() -> Iterator[tuple[int, Echo]]:
    app = Echo()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, ws="wsproto", lifespan="off", log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield sock.getsockname()[1], app
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_sessions_and_messages_are_counted_apart_with_their_own_failures(
    echo: tuple[int, Echo], tmp_path: Path
) -> None:
    port, server = echo
    (tmp_path / "plan.toml").write_text(PLAN.replace("PORT", str(port)))
    done = pinchpoint(tmp_path, "load", "plan.toml", "--out", "kept", timeout=60)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "kept" / "summary.json").read_text())
    kinds = summary["kinds"]
    assert set(kinds) == {"ws_session", "ws_message"}
    sessions, messages = kinds["ws_session"], kinds["ws_message"]
    print(f"\n{sessions['requests']} sessions, {messages['requests']} messages")
    assert server.upgrades >= 50, server.upgrades
    assert (sessions["requests"], sessions["failed"]) == (server.upgrades, server.refused)
    assert (messages["requests"], messages["failed"]) == (server.messages, server.wrong)
    assert abs(sessions["error_rate"] - 1 / REFUSE_EVERY) < 0.02
    assert abs(messages["error_rate"] - 1 / WRONG_EVERY) < 0.01
    # A session that passed its upgrade sends its messages until one comes back wrong.
    assert messages["requests"] > 2 * (server.upgrades - server.refused)
    table = done.stdout[done.stdout.index("by kind") :]
    for name, k in (("WebSocket sessions", sessions), ("WebSocket messages", messages)):
        row = next(line for line in table.splitlines() if name in line)
        cells = [cell.strip() for cell in row.strip("│ ").split("│")]
        rate = f"{100 * k['failed'] / k['requests']:.2f}%"
        assert cells[:4] == [name, f"{k['requests']:,}", f"{k['failed']:,}", rate], row
