"""Latency percentiles are over answered requests only: a load on a dead server has no
latencies at all (None in the JSON, "no responses" on the terminal), not the time its
connections took to be refused; with some answers, the errors' times are left out."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", "load", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


class _Slow(BaseHTTPRequestHandler):
    """Answers /ok after 20 ms; drops the connection of any other path at once."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if not self.path.startswith("/ok"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        time.sleep(0.02)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def slow_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_dead_server_has_no_latency_percentiles() -> None:
    done = load(dead_url(), "-c", "2", "-d", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["responses"] == 0 and summary["requests"] > 0
    assert summary["latency_us"] is None
    assert [s["latency_us"] for s in summary["steps"]] == [None]
    assert [e["latency_us"] for e in summary["endpoints"]] == [None]


def test_the_terminal_says_no_responses() -> None:
    done = load(dead_url(), "-c", "2", "-d", "0.5")
    assert done.returncode == 0, done.stderr
    assert "latency: no responses" in done.stdout
    assert "p50" not in done.stdout


def test_errors_are_left_out_of_the_percentiles(tmp_path: Path) -> None:
    with slow_server() as port:
        plan = f"""\
[target]
url = "http://127.0.0.1:{port}"
tag = false
[load]
users = 2
duration = "1s"
warmup = "0s"
[[request]]
path = "/ok"
[[request]]
path = "/drop"
"""
        path = tmp_path / "plan.toml"
        path.write_text(plan)
        done = load(str(path), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["responses"] > 0 and sum(summary["errors"].values()) > 0
    # Every answer took 20 ms or more; the dropped requests failed at once.
    assert summary["latency_us"]["min"] >= 20_000
    [step] = summary["steps"]
    assert step["latency_us"]["min"] >= 20_000
    ok, dropped = summary["endpoints"]
    assert ok["latency_us"]["min"] >= 20_000
    assert dropped["failed"] == dropped["requests"] > 0 and dropped["latency_us"] is None
