"""A handler served on loopback in a thread, for tests and benches to load, and a quiet
HTTP/1.1 handler to build one on."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """A ThreadingHTTPServer of `handler` on 127.0.0.1 in a thread; yields its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class Quiet(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing and answers with whole bodies."""

    protocol_version = "HTTP/1.1"

    def answer(self, status: int, body: bytes, content_type: str | None = None) -> None:
        """Sends `body` with its length (and `content_type`, if given) as the answer."""
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass
