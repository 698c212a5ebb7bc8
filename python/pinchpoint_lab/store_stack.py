"""The demo stack's proxy and gunicorn serving store_app.py's app, which reaches MariaDB
(mariadb_lock: a hot row) or Redis (redis_core: a command that computes on Redis's one
main thread); the plan's app calls the store, sampled from inside.

    with RedisServer() as redis, StoreStack(workdir, redis=redis, workers=4) as stack:
        path = f"/api/redis?loops={loops_for(redis, 5.0)}"
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pinchpoint.demo.stack import DemoStack
from pinchpoint_lab.apps import own_app
from pinchpoint_lab.mariadb import MariadbServer
from pinchpoint_lab.redis_server import RedisServer
from pinchpoint_lab.store_app import (
    COUNTERS_SQL,
    LOOP_SCRIPT,
    MYSQL_DSN_ENV,
    REDIS_URL_ENV,
    redis_connect,
)

STORE_APP = "pinchpoint_lab.store_app:wsgi()"
# The loops timed to calibrate a Redis command's cost, and how many times (the fastest wins).
CALIBRATION_LOOPS = 2_000_000
CALIBRATION_ROUNDS = 5


class StoreStack(DemoStack):
    """A proxy → gunicorn → the store app, connected to `mariadb` or `redis`."""

    def __init__(
        self,
        workdir: Path,
        workers: int = 4,
        *,
        mariadb: MariadbServer | None = None,
        redis: RedisServer | None = None,
        worker_class: str = "sync",
        threads: int = 1,
        front: str = "nginx",
        server_config: Literal["flags", "file"] = "flags",
    ) -> None:
        env = {}
        if mariadb is not None:
            env[MYSQL_DSN_ENV] = mariadb.dsn
        if redis is not None:
            env[REDIS_URL_ENV] = redis.url
        super().__init__(
            workdir, workers, app_env=env, worker_class=worker_class, threads=threads,
            front=front, server_config=server_config,
        )  # fmt: skip
        self.mariadb = mariadb
        self.redis = redis

    def _server_argv(self) -> list[str]:
        return own_app(self._gunicorn_argv(), STORE_APP)

    def components(self) -> list[dict[str, Any]]:
        """The demo stack's, the app calling its store, sampled from inside."""
        store = []
        if self.mariadb is not None:
            store.append(self.mariadb.component("mariadb"))
        if self.redis is not None:
            store.append(redis_component(self.redis))
        names = [s["name"] for s in store]
        own = [
            {**c, "calls": [*c["calls"], *names]} if c["name"] == "app" else c
            for c in super().components()
        ]
        return [*own, *store]


def redis_component(redis: RedisServer, name: str = "redis") -> dict[str, Any]:
    """The Redis server as a plan names it: its process, and its URL's variable."""
    return {
        "name": name,
        "role": "cache",
        "calls": [],
        "process": {"pids": [redis.pid]},
        "redis": {"url_env": redis.url_env},
    }


def prepare_counters(mariadb: MariadbServer) -> None:
    """The hot row's table in the `shop` database."""
    for sql in COUNTERS_SQL:
        mariadb.execute(sql.replace("counters", "shop.counters", 1))


def loops_for(redis: RedisServer, ms: float) -> int:
    """The Lua loop's turns that cost Redis's main thread about `ms` ms, from the fastest
    of a few timed runs of CALIBRATION_LOOPS turns."""
    conn = redis_connect(redis.url)
    try:
        fastest = float("inf")
        for _ in range(CALIBRATION_ROUNDS):
            began = time.perf_counter()
            conn.command("EVAL", LOOP_SCRIPT, "0", str(CALIBRATION_LOOPS))
            fastest = min(fastest, time.perf_counter() - began)
    finally:
        conn.close()
    return max(1, round(CALIBRATION_LOOPS * ms / (fastest * 1000)))
