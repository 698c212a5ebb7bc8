"""The demo app's hot-row endpoint: every request updates the same database row.

`POST /api/hot?hold=5` runs, in one PostgreSQL transaction,
`UPDATE counters SET n = n + 1 WHERE id = 1` and then `hold` ms of work while it holds
the row's lock, so concurrent requests queue for that lock: row-lock contention. Each
statement carries the run's tag in a sqlcommenter comment, so the database's statement
log is matched to the run. Each worker thread keeps one connection.
"""

from __future__ import annotations

import time
from typing import Any

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from pinchpoint.demo.database import ThreadConnections, request_tag, sql_comment
from pinchpoint.demo.query import int_arg

COUNTERS_SQL = """
CREATE TABLE IF NOT EXISTS counters (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO counters VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
"""
DEFAULT_HOLD_MS = 5
MAX_HOLD_MS = 1000


def bump(conn: Any, hold_s: float, comment: str) -> int:
    """One transaction: update the hot row, work `hold_s` holding its lock, commit."""
    with conn.cursor() as cur:
        cur.execute(f"BEGIN {comment}".encode())
        try:
            cur.execute(
                f"UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING n {comment}".encode()
            )
            row = cur.fetchone()
            time.sleep(hold_s)
            cur.execute(f"COMMIT {comment}".encode())
        except BaseException:
            if not conn.closed:
                cur.execute(b"ROLLBACK")
            raise
    return int(row[0]) if row else 0


def register(app: Flask, dsn: str | None) -> None:
    """Adds `POST /api/hot` to the app; it answers 503 when dsn is None."""
    connections = ThreadConnections(dsn) if dsn is not None else None

    @app.post("/api/hot")
    def hot() -> ResponseReturnValue:
        hold = int_arg("hold", DEFAULT_HOLD_MS, 0, MAX_HOLD_MS)
        if hold is None:
            return jsonify(error=f"hold must be an integer 0..{MAX_HOLD_MS} (ms)"), 400
        if connections is None:
            return jsonify(error="no database: the app runs without PINCHPOINT_DEMO_PG"), 503
        import psycopg

        try:
            n = bump(connections.get(), hold / 1000, sql_comment(request_tag()))
        except psycopg.Error as e:
            connections.drop()
            return jsonify(error=f"database: {e}"), 503
        return jsonify(n=n)
