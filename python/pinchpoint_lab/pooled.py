"""nginx → gunicorn → pooled_app.py's app, which reaches PostgreSQL through a pool of a
few connections per process: a limit inside the app that no server setting shows."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.demo.env import PG_DSN_ENV
from pinchpoint.demo.stack import DemoStack
from pinchpoint_lab.apps import own_app
from pinchpoint_lab.pooled_app import POOL_SIZE_ENV, QUERY_MS_ENV

POOLED_APP = "pinchpoint_lab.pooled_app:wsgi()"


class PooledStack(DemoStack):
    """The demo stack's proxy and gunicorn, serving the pooled app: `connections` to the
    database at `dsn` in each worker process, each request's statement waiting `query_ms`."""

    def __init__(
        self,
        workdir: Path,
        dsn: str,
        connections: int,
        query_ms: float,
        workers: int = 1,
        threads: int = 16,
    ) -> None:
        env = {PG_DSN_ENV: dsn, POOL_SIZE_ENV: str(connections), QUERY_MS_ENV: f"{query_ms:g}"}
        worker_class = "gthread" if threads > 1 else "sync"
        super().__init__(workdir, workers, app_env=env, worker_class=worker_class, threads=threads)

    def _server_argv(self) -> list[str]:
        return own_app(self._gunicorn_argv(), POOLED_APP)
