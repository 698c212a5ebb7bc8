"""An app whose requests share a few PostgreSQL connections: a pool of
PINCHPOINT_LAB_POOL_SIZE connections per process, made at its start, that a request takes
one from (waiting while none is free) and gives back, as SQLAlchemy's QueuePool or
psycopg_pool do. `GET /api/report` runs one statement that waits PINCHPOINT_LAB_QUERY_MS
in the database (pg_sleep: the database's backend waits, needs no core), tagged with the
run's tag as a sqlcommenter comment. The probe logs the app's time.

Run under gunicorn, without --preload (a connection made before the fork is not the
worker's): gunicorn 'pinchpoint_lab.pooled_app:wsgi()'
"""

from __future__ import annotations

import os
import queue
from typing import Any

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from pinchpoint.demo.database import request_tag, sql_comment
from pinchpoint.demo.env import PG_DSN_ENV, PROBE_LOG_ENV
from pinchpoint.probe import ProbeWSGI

POOL_SIZE_ENV = "PINCHPOINT_LAB_POOL_SIZE"
QUERY_MS_ENV = "PINCHPOINT_LAB_QUERY_MS"
READY_PATH = "/healthz"


def wsgi() -> Flask:
    """The app, its pool made from the environment."""
    import psycopg

    dsn = os.environ[PG_DSN_ENV]
    pool: queue.Queue[Any] = queue.Queue()
    for _ in range(int(os.environ[POOL_SIZE_ENV])):
        pool.put(psycopg.connect(dsn, autocommit=True, connect_timeout=10))
    wait_s = float(os.environ[QUERY_MS_ENV]) / 1000
    app = Flask(__name__)

    @app.get("/api/report")
    def report() -> ResponseReturnValue:
        conn = pool.get()
        try:
            conn.execute(f"SELECT pg_sleep({wait_s}) {sql_comment(request_tag())}".encode())
        finally:
            pool.put(conn)
        return jsonify(ok=True)

    @app.get(READY_PATH)
    def ready() -> ResponseReturnValue:
        return "ok"

    app.wsgi_app = ProbeWSGI(app.wsgi_app, log_path=os.environ[PROBE_LOG_ENV])  # type: ignore[method-assign]
    return app
