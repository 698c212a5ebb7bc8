"""A bare WSGI app whose requests go to MariaDB or Redis, for the matrix's mariadb_lock and
redis_core classes; the probe logs the app's time.

- `POST /api/hot?hold=N`: in one MariaDB (InnoDB) transaction, updates the one row of
  `counters` and holds its lock N ms before committing, as the demo app's PostgreSQL hot
  row does; each statement carries the run's tag as a sqlcommenter comment.
- `GET /api/redis?loops=N`: one EVAL of a Lua loop of N turns, which Redis runs on its
  main thread: N sets the command's CPU (store_stack.loops_for calibrates it).

Each worker thread keeps one connection to each, made at its first request.

    gunicorn 'pinchpoint_lab.store_app:wsgi()'
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from pinchpoint.collect.redis.resp import RespConnection
from pinchpoint.demo.database import sql_comment
from pinchpoint.demo.env import PROBE_LOG_ENV
from pinchpoint.logformats.tag import find_tag
from pinchpoint.plan.redis import parse_url
from pinchpoint.probe import ProbeWSGI

MYSQL_DSN_ENV = "PINCHPOINT_LAB_STORE_MYSQL"
REDIS_URL_ENV = "PINCHPOINT_LAB_STORE_REDIS"
COUNTERS_SQL = (
    "CREATE TABLE IF NOT EXISTS counters (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB",
    "INSERT IGNORE INTO counters VALUES (1, 0)",
)
# The Lua loop Redis runs for `loops` turns.
LOOP_SCRIPT = "local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1"
# What the stack asks to know the app is up.
READY_PATH = "/healthz"
MAX_HOLD_MS = 1000
MAX_LOOPS = 100_000_000

Start = Callable[[str, list[tuple[str, str]]], Any]


class _Connections(threading.local):
    mysql: Any = None
    redis: RespConnection | None = None


def mysql_connect(dsn: str) -> Any:
    """A PyMySQL connection to a `mysql://user[:password]@host:port/database` DSN."""
    import pymysql

    from pinchpoint.collect.database.mysql_sampler import parse_dsn

    address = parse_dsn(dsn)
    return pymysql.connect(
        host=address.host, port=address.port, user=address.user,
        password=address.password or "", database=address.database, autocommit=True,
        connect_timeout=10,
    )  # fmt: skip


def redis_connect(url: str) -> RespConnection:
    address = parse_url(url)
    conn = RespConnection(address.host, address.port, 30.0)
    if address.password is not None:
        conn.command("AUTH", address.password)
    return conn


class StoreApp:
    """The app: its routes, and a connection of each kind per thread."""

    def __init__(self) -> None:
        self._local = _Connections()

    def __call__(self, environ: dict[str, Any], start: Start) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        route = (environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
        try:
            if route == ("POST", "/api/hot"):
                body = self._hot(_number(query, "hold", MAX_HOLD_MS), environ)
            elif route == ("GET", "/api/redis"):
                body = self._redis(_number(query, "loops", MAX_LOOPS))
            elif route == ("GET", READY_PATH):
                body = b"ok\n"
            else:
                return _answer(start, "404 Not Found", b"no such route\n")
        except ValueError as e:
            return _answer(start, "400 Bad Request", f"{e}\n".encode())
        except Exception as e:  # a store that failed: its connection is dropped, 503
            self._local.mysql = self._local.redis = None
            return _answer(start, "503 Service Unavailable", f"{type(e).__name__}: {e}\n".encode())
        return _answer(start, "200 OK", body)

    def _hot(self, hold_ms: int, environ: dict[str, Any]) -> bytes:
        if self._local.mysql is None:
            self._local.mysql = mysql_connect(os.environ[MYSQL_DSN_ENV])
        comment = sql_comment(find_tag(environ.get("QUERY_STRING", "")))
        with self._local.mysql.cursor() as cursor:
            cursor.execute(f"BEGIN {comment}")
            cursor.execute(f"UPDATE counters SET n = n + 1 WHERE id = 1 {comment}")
            time.sleep(hold_ms / 1000)
            cursor.execute(f"COMMIT {comment}")
        return b"ok\n"

    def _redis(self, loops: int) -> bytes:
        if self._local.redis is None:
            self._local.redis = redis_connect(os.environ[REDIS_URL_ENV])
        self._local.redis.command("EVAL", LOOP_SCRIPT, "0", str(loops))
        return b"ok\n"


def _number(query: dict[str, list[str]], name: str, most: int) -> int:
    try:
        value = int(query[name][0])
    except (KeyError, ValueError):
        raise ValueError(f"{name} must be an integer 0..{most}") from None
    if not 0 <= value <= most:
        raise ValueError(f"{name} must be an integer 0..{most}")
    return value


def _answer(start: Start, status: str, body: bytes) -> list[bytes]:
    start(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def wsgi() -> ProbeWSGI:
    """The app behind the probe, which logs its time to PINCHPOINT_PROBE_LOG's file."""
    return ProbeWSGI(StoreApp(), log_path=os.environ[PROBE_LOG_ENV])
