"""A throwaway Redis server on 127.0.0.1 for the tests that sample Redis from inside.

    with RedisServer() as server:
        sampler = RedisSampler("redis", Redis(url_env=server.url_env))

redis-server serves from a new folder under the system's temp folder on a free loopback
port, with a password, no persistence, DEBUG allowed from loopback (DEBUG POPULATE fills
it at once) and every command slower than 10 ms in its SLOWLOG; the folder is removed on
exit."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pinchpoint.collect.redis.resp import RedisError, RespConnection
from pinchpoint.demo.errors import StackError
from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started
from pinchpoint_lab.ports import HOST, free_port

PASSWORD = "lab-redis-secret"
SLOWER_THAN_US = 10_000


def find_redis() -> Path | None:
    """redis-server on PATH; None when not installed."""
    path = shutil.which("redis-server")
    return Path(path) if path else None


class RedisServer(Started):
    """redis-server on 127.0.0.1 and a free port; stopped and its folder removed on exit.
    While it runs, its URL (with the password) is in `url_env`."""

    def __init__(self, startup_timeout_s: float = 20.0) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.folder: Path | None = None
        self.port = free_port()
        self._server: Child | None = None

    @property
    def url_env(self) -> str:
        return f"PINCHPOINT_LAB_REDIS_{self.port}"

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@{HOST}:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self._server is not None
        return self._server.pid

    def start(self) -> None:
        server = find_redis()
        if server is None:
            raise StackError("Redis is not installed: apt-get install redis-server")
        self.folder = Path(tempfile.mkdtemp(prefix="pinchpoint-redis-"))
        try:
            argv = [str(server), "--port", str(self.port), "--bind", HOST]
            argv += ["--dir", str(self.folder), "--save", "", "--appendonly", "no"]
            argv += ["--requirepass", PASSWORD, "--enable-debug-command", "local"]
            argv += ["--slowlog-log-slower-than", str(SLOWER_THAN_US), "--daemonize", "no"]
            self._server = Child("redis", argv, self.folder / "server.out", dict(os.environ))
            self._wait_ready()
            os.environ[self.url_env] = self.url
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM, SIGKILL after a while; removes the folder. Idempotent."""
        server, self._server = self._server, None
        folder, self.folder = self.folder, None
        os.environ.pop(self.url_env, None)
        try:
            if server is not None:
                server.stop(10.0)
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def connect(self) -> RespConnection:
        """A new connection, logged in."""
        conn = RespConnection(HOST, self.port, 30.0)
        conn.command("AUTH", PASSWORD)
        return conn

    def command(self, *args: str) -> Any:
        """One command on a connection of its own."""
        conn = self.connect()
        try:
            return conn.command(*args)
        finally:
            conn.close()

    def _wait_ready(self) -> None:
        assert self._server is not None and self.folder is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._server.exited() and time.monotonic() < deadline:
            try:
                if self.command("PING") == "PONG":
                    return
            except RedisError:
                time.sleep(0.05)
        out = (self.folder / "server.out").read_text(errors="replace")[-3000:]
        raise StackError(f"Redis did not answer on {HOST}:{self.port}:\n{out}")
