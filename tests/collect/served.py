"""What the tests of a real server's log lines and pool share: a request to it on loopback,
waiting for it to listen and for its log, and its pool as the resource sampler reads it."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint_lab.waits import until


def get(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    """The status of a GET to 127.0.0.1 (no proxy, whatever the environment says)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with opener.open(request, timeout=10) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def wait_listening(process: subprocess.Popen[bytes], port: int, log: Path, seconds: float) -> None:
    """Until something listens on the port; fails naming the server's log if it exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text(errors="replace") if log.exists() else ""
            pytest.fail(f"{process.args!r} exited with {process.returncode}: {text[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"{process.args!r} did not listen on {port} within {seconds} s")


def wait_lines(path: Path, count: int) -> None:
    if not until(lambda: path.exists() and path.read_bytes().count(b"\n") >= count):
        pytest.fail(f"{path} did not reach {count} lines")


def sampled_pool(pid: int, workers: int) -> dict[str, Any]:
    """The pool columns the resource sampler gives the server `pid` once `workers` children
    of it run."""
    if not until(lambda: len(psutil.Process(pid).children()) >= workers, seconds=20):
        pytest.fail(f"process {pid} did not fork {workers} workers within 20 s")
    with ResourceSampler({"server": ProcessSelector(pids=(pid,))}, interval_s=0.2) as sampler:
        time.sleep(0.5)
    rows = [r for r in sampler.rows() if r["component"] == "server"]
    assert rows
    return rows[-1]
