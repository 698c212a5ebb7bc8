"""ShapedLink: a real namespace, veth pair and token buckets, with a real HTTP server."""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pinchpoint.demo.errors import StackError
from pinchpoint_lab.netns import ShapedLink

pytestmark = [
    pytest.mark.timed,  # times a shaped link: one at a time, beside the parallel part
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None,
        reason="needs root, ip and tc",
    ),
]

RATE = 2_000_000
PORT = 8765


def _left(link: ShapedLink) -> list[str]:
    """What of the link still exists: its namespace, its root-side interface."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left = [link.netns] if link.netns in names.split() else []
    shown = subprocess.run(["ip", "link", "show", link.host_if], capture_output=True)
    return left + ([link.host_if] if shown.returncode == 0 else [])


@contextmanager
def serving(link: ShapedLink, folder: Path) -> Iterator[str]:
    """python -m http.server inside the namespace; yields its base URL once it accepts."""
    argv = [sys.executable, "-m", "http.server", str(PORT), "--bind", link.ns_address]
    server = link.popen(
        [*argv, "--directory", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection((link.ns_address, PORT), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        yield f"http://{link.ns_address}:{PORT}"
    finally:
        server.kill()
        server.wait(timeout=10)


def fetch_rate(url: str, requests: int = 1) -> float:
    """Bytes per second of `requests` sequential GETs of url (each read to its end)."""
    got = 0
    started = time.monotonic()
    for _ in range(requests):
        with urllib.request.urlopen(url, timeout=30) as response:
            while chunk := response.read(1 << 16):
                got += len(chunk)
    return got / (time.monotonic() - started)


def big_file(folder: Path, size: int) -> Path:
    path = folder / "big.bin"
    path.write_bytes(os.urandom(size))
    return path


def test_download_runs_at_the_shaped_rate_and_nothing_is_left(tmp_path: Path) -> None:
    big_file(tmp_path, 3 * RATE)
    with ShapedLink(RATE) as link:
        assert link.host_address.startswith("10.213.") and link.ns_address.startswith("10.213.")
        assert link.prefix == ["ip", "netns", "exec", link.netns]
        with serving(link, tmp_path) as url:
            rate = fetch_rate(f"{url}/big.bin")
        assert _left(link) == [link.netns, link.host_if]
    assert abs(rate - RATE) / RATE < 0.2, rate
    assert _left(link) == []


def test_upload_is_shaped_too(tmp_path: Path) -> None:
    with ShapedLink(RATE) as link:
        sink = link.popen(
            [sys.executable, "-c", _SINK, link.ns_address, str(PORT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        payload = os.urandom(1 << 16)
        started = time.monotonic()
        with socket.create_connection((link.ns_address, PORT), timeout=30) as conn:
            for _ in range(2 * RATE // len(payload)):
                conn.sendall(payload)
            conn.shutdown(socket.SHUT_WR)
            received = int(conn.makefile().readline())
        rate = received / (time.monotonic() - started)
    assert received == 2 * RATE // len(payload) * len(payload)
    assert abs(rate - RATE) / RATE < 0.2, rate
    assert _left(link) == []


_SINK = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
conn, _ = server.accept()
got = 0
while chunk := conn.recv(1 << 16):
    got += len(chunk)
conn.sendall(f"{got}\\n".encode())
"""


def test_everything_is_removed_when_the_body_fails(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), ShapedLink(RATE) as link:
        link.popen(["sleep", "60"])
        raise RuntimeError("boom")
    assert _left(link) == []


def test_a_failed_setup_leaves_nothing(tmp_path: Path) -> None:
    link = ShapedLink(RATE, burst_bytes=1 << 40)  # tc refuses such a bucket
    with pytest.raises(StackError), link:
        pass
    assert _left(link) == []
