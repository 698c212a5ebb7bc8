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
from pathlib import Path
from typing import Any

from pinchpoint.collect.redis.resp import RedisError, RespConnection
from pinchpoint.demo.errors import StackError
from pinchpoint.demo.procs import Child
from pinchpoint_lab.data_server import DataServer
from pinchpoint_lab.ports import HOST

PASSWORD = "lab-redis-secret"
SLOWER_THAN_US = 10_000


def find_redis() -> Path | None:
    """redis-server on PATH; None when not installed."""
    path = shutil.which("redis-server")
    return Path(path) if path else None


class RedisServer(DataServer):
    """redis-server on 127.0.0.1 and a free port; stopped and its folder removed on exit.
    While it runs, its URL (with the password) is in `url_env`."""

    title = "Redis"
    stop_s = 10.0

    def __init__(self, startup_timeout_s: float = 20.0) -> None:
        super().__init__(startup_timeout_s)

    @property
    def url_env(self) -> str:
        return f"PINCHPOINT_LAB_REDIS_{self.port}"

    @property
    def address_env(self) -> str:
        return self.url_env

    @property
    def url(self) -> str:
        return f"redis://:{PASSWORD}@{HOST}:{self.port}/0"

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
        self._wait_answering(self._answers, "server.out", pause_s=0.05)

    def _answers(self) -> bool:
        try:
            return bool(self.command("PING") == "PONG")
        except RedisError:
            return False
