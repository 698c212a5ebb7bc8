"""`pinchpoint load`: a plain load test against a URL, summarised for people and machines."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Handler.seen.append(self.path)
        body = b"hello" if self.path.startswith("/ok") else b"no"
        self.send_response(200 if self.path.startswith("/ok") else 503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    _Handler.seen = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def load(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "load", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_json_summary_counts_what_the_server_saw(server: int) -> None:
    done = load(f"http://127.0.0.1:{server}/ok?x=1", "-c", "3", "-d", "1", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["requests"] == len(_Handler.seen) > 0
    assert summary["statuses"] == {"200": summary["requests"]}
    assert summary["bytes"] == 5 * summary["requests"]
    assert summary["errors"] == {}
    assert (
        summary["latency_us"]["p50"] <= summary["latency_us"]["p99"] <= summary["latency_us"]["max"]
    )
    # Without --tag the URL goes out exactly as given.
    assert set(_Handler.seen) == {"/ok?x=1"}


def test_error_statuses_are_counted_and_the_run_goes_on(server: int) -> None:
    summary = json.loads(
        load(f"http://127.0.0.1:{server}/bad", "-c", "2", "-d", "0.5", "--json").stdout
    )
    assert summary["statuses"] == {"503": summary["requests"]}
    assert summary["requests"] > 1


def test_a_dead_target_gives_connect_errors_not_a_crash() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    summary = json.loads(load(f"http://127.0.0.1:{port}/", "-c", "2", "-d", "0.5", "--json").stdout)
    assert summary["responses"] == 0
    assert summary["errors"]["connect_refused"] == summary["requests"] > 0


def test_terminal_summary_shows_rate_and_percentiles(server: int) -> None:
    done = load(f"http://127.0.0.1:{server}/ok", "-c", "2", "-d", "0.5")
    assert done.returncode == 0, done.stderr
    assert "req/s over 2 connections" in done.stdout
    assert "p99.9" in done.stdout and "200: " in done.stdout
