"""For the tests that interrupt `pinchpoint load` and `run`: a real nginx on 127.0.0.1
whose access log counts the requests it answered, a listener that never answers, and the
command started as a process to signal."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint_lab.ports import end, free_port
from pinchpoint_lab.waits import until


def nginx_or_skip() -> Path:
    try:
        return find_nginx()
    except NginxNotFound as e:
        pytest.skip(str(e))


def wait_until(check: Callable[[], bool], limit_s: float, what: str) -> None:
    if not until(check, limit_s, every=0.05):
        pytest.fail(f"{what}: not within {limit_s:g} s")


@dataclass(frozen=True)
class Nginx:
    port: int
    folder: Path

    @property
    def access_log(self) -> Path:
        return self.folder / "access.log"

    @property
    def pid_file(self) -> Path:
        return self.folder / "nginx.pid"

    def answered(self, status: str = "200") -> int:
        """Requests logged with that status (nginx logs each once it has answered)."""
        if not self.access_log.exists():
            return 0
        return sum(f'" {status} ' in line for line in self.access_log.read_text().splitlines())


@contextmanager
def nginx(folder: Path) -> Iterator[Nginx]:
    """nginx on 127.0.0.1 answering 200 "ok" to any path, logging in pinchpoint's format."""
    binary = nginx_or_skip()
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""
    (folder / "nginx.conf").write_text(
        f"""daemon off;
{user}worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 1024; }}
http {{
    log_format pinchpoint '{NGINX_FORMAT}';
    access_log {folder / "access.log"} pinchpoint;
{temp}
    server {{
        listen 127.0.0.1:{port};
        keepalive_requests 1000000;
        location / {{ return 200 "ok\\n"; }}
    }}
}}
"""
    )
    argv = [str(binary), "-p", f"{folder}/", "-c", str(folder / "nginx.conf")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                log = folder / "error.log"
                pytest.fail(f"nginx exited: {log.read_text() if log.exists() else ''}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                return False
            return True

        wait_until(listening, 10, "nginx listening")
        # The probe connection above sent no request: nothing logged yet.
        yield Nginx(port, folder)
    finally:
        end(proc)


@contextmanager
def never_answering() -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections (the kernel's backlog) and requests but
    never answers: every request to it stays in flight until its timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def start(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`pinchpoint <args>` as a process of its own, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], limit_s: float = 30) -> tuple[int, str, str]:
    """Waits for the process (killed past the limit); its exit code, stdout and stderr."""
    try:
        out, err = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        pytest.fail(f"the command did not end within {limit_s:g} s: {err}")
    return proc.returncode, out, err
