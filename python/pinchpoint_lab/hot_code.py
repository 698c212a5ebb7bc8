"""A CPU-bound Flask app with one hot function among several cheaper ones, served by
gunicorn on loopback: the stack on which `run --profile` must name the hot function first.

Each request runs `hot_loop` (about 60% of its CPU), then `checksum`, `render_rows` and
`parse_args` (the rest, each a smaller share), all plain Python so that the time is spent
in their own frames.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.request
from pathlib import Path

from flask import Flask, request

from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint_lab.ports import free_port

HOT_FUNCTION = "hot_loop"
CHEAPER_FUNCTIONS = ("checksum", "render_rows", "parse_args")
HOST = "127.0.0.1"
READY_TIMEOUT_S = 20.0

app = Flask(__name__)


def hot_loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += (i * i) % 7
    return total


def checksum(n: int) -> int:
    value = 0
    for i in range(n):
        value = (value * 31 + i) & 0xFFFF
    return value


def render_rows(n: int) -> str:
    return "".join(f"<tr><td>{i}</td></tr>" for i in range(n))


def parse_args(n: int) -> list[int]:
    return [int(str(i)) for i in range(n)]


@app.get("/work")
def work() -> str:
    scale = int(request.args.get("scale", "1"))
    parse_args(150 * scale)
    rows = render_rows(120 * scale)
    return f"{hot_loop(6000 * scale)} {checksum(2000 * scale)} {len(rows)}"


class HotCodeServer(Started):
    """gunicorn serving the app on a free loopback port, its access log in pinchpoint's
    format and its pid in a file, in `workdir`."""

    def __init__(self, workdir: Path, workers: int = 2) -> None:
        self.workdir = workdir
        self.workers = workers
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.access_log = workdir / "gunicorn-access.log"
        self.pid_file = workdir / "gunicorn.pid"
        self._child: Child | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable, "-m", "gunicorn",
            "--workers", str(self.workers), "--bind", f"{HOST}:{self.port}",
            "--access-logfile", str(self.access_log), "--access-logformat", GUNICORN_FORMAT,
            "--pid", str(self.pid_file), "--backlog", "2048", "--preload",
            "pinchpoint_lab.hot_code:app",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        self._child = Child("gunicorn", argv, self.workdir / "gunicorn.out", env)
        self._wait_ready()

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop()
            self._child = None

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/work", timeout=2) as answer:
                    if answer.status == 200 and self.pid_file.is_file():
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"gunicorn did not answer at {self.url}: see {self.workdir}")

    def plan_text(self, load: str, profile: str | None = None) -> str:
        """A plan sending GET /work with `load` (the [load] table's lines) to the server,
        its access log and processes as component `app`; `profile` the [profile] table's
        lines, if any."""
        lines = [
            "[target]", f'url = "{self.url}"', "", "[load]", load, "",
            "[[request]]", 'path = "/work"', "",
            "[[component]]", 'name = "app"', 'role = "app"', f"workers = {self.workers}",
            "[component.log]", f'path = "{self.access_log}"', 'format = "gunicorn"',
            "[component.process]", f'pid_file = "{self.pid_file}"',
        ]  # fmt: skip
        if profile is not None:
            lines += ["", "[profile]", profile]
        return "\n".join(lines) + "\n"
