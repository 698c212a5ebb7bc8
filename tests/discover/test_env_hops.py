"""An app that holds no connection when read (a client per request) still names where it
sends requests on: the local listeners its own environment's URLs point at."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from pinchpoint.discover.hops import named_by_environment
from pinchpoint.discover.listeners import Sockets
from pinchpoint.discover.tier import Address

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def test_a_url_in_the_environment_names_a_listener_and_keeps_no_value() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        env = {
            **os.environ,
            "SHIPPING_URL": f"http://127.0.0.1:{port}/rates",
            "DATABASE_URL": "postgresql://app:hunter2@127.0.0.1:1/shop",  # nothing listens
            "NOT_A_URL": f"127.0.0.1:{port}",
        }
        app = subprocess.Popen(SLEEPER, env=env)
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not os.path.exists(f"/proc/{app.pid}/environ"):
                time.sleep(0.01)
            found = named_by_environment(app.pid, Sockets.read(), {app.pid})
        finally:
            app.kill()
            app.wait(5)
    assert found == [("SHIPPING_URL", Address("127.0.0.1", port))]
