"""The HTTP server the live outputs answer with: threads for its requests, one daemon
thread serving, IPv4 or IPv6 by the host given."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def start_server(
    host: str, port: int, handler: type[BaseHTTPRequestHandler]
) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """A server listening on (host, port), served from a daemon thread already started."""
    httpd = (_Server6 if ":" in host else _Server)((host, port), handler)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    return httpd, thread


def stop_server(httpd: ThreadingHTTPServer, thread: threading.Thread) -> None:
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)
