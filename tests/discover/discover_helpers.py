"""Servers started for the discovery tests, on 127.0.0.1, and always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil

from pinchpoint.discover.tier import Address

HOST = "127.0.0.1"
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str, method: str = "GET") -> int:
    with _opener.open(urllib.request.Request(url, method=method), timeout=20) as response:
        response.read()
        return int(response.status)


def listens(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def running(
    argv: list[str],
    cwd: Path,
    port: int,
    workers: int,
    env: dict[str, str] | None = None,
    output: Path | None = None,
) -> Iterator[int]:
    """Runs a pre-fork server until it listens on `port` with `workers` children; its pid."""
    out = (output or cwd / "server.out").open("ab")
    server = subprocess.Popen(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=out,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (listens(port) and len(psutil.Process(server.pid).children()) >= workers):
            if server.poll() is not None or time.monotonic() > deadline:
                log = (output or cwd / "server.out").read_text(errors="replace")
                raise AssertionError(f"{argv[0]} did not start:\n{log[-2000:]}")
            time.sleep(0.05)
        yield server.pid
    finally:
        out.close()
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def at(port: int) -> Address:
    return Address(HOST, port)
