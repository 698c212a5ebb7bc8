"""A target for a run to load on loopback (served by `pinchpoint_lab.serving`): each GET
answered `ok`, 200 unless told otherwise, with nothing logged."""

from __future__ import annotations

import socket
import time
from http.server import BaseHTTPRequestHandler


class OkTarget(BaseHTTPRequestHandler):
    """Answers each GET `ok` after `delay_s`. A subclass notes what it needs in `do_GET`,
    then calls `answer`."""

    protocol_version = "HTTP/1.1"
    delay_s = 0.0
    # Headers and body go in two writes: without TCP_NODELAY, each waits on a delayed ACK.
    nodelay = False

    def setup(self) -> None:
        super().setup()
        if self.nodelay:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self.answer(200, self.delay_s)

    def answer(self, status: int = 200, delay_s: float = 0.0) -> None:
        if delay_s:
            time.sleep(delay_s)
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return
