"""The demo app's slow-query endpoint: every request makes PostgreSQL scan rows.

`GET /api/scan?rows=100000` counts, in one statement, the rows of the first `rows` of the
`readings` table whose value falls in a band: a sequential scan of tuples in shared
buffers, so the database's backend computes for as long as the scan takes and the app
worker waits on it. The database, not the app, spends the CPU; under load the backends
queue for the host's cores. `SCAN_SQL` creates and fills the table (MAX_ROWS rows).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from pinchpoint.demo.database import ThreadConnections, request_tag, sql_comment
from pinchpoint.demo.query import int_arg

MAX_ROWS = 1_000_000
DEFAULT_ROWS = 100_000
CALIBRATION_ROWS = 200_000
# No index: the scan reads the heap in order, and a primary key made filling the table
# take 4 s instead of 1.
SCAN_SQL = f"""
CREATE TABLE IF NOT EXISTS readings (id integer NOT NULL, value integer NOT NULL);
INSERT INTO readings SELECT g, (g::bigint * 7919 % 1000)::integer FROM generate_series(1, {MAX_ROWS}) AS g
    WHERE NOT EXISTS (SELECT 1 FROM readings);
ANALYZE readings;
"""


def scan(conn: Any, rows: int, comment: str) -> int:
    """Counts the first `rows` readings whose value is in [100, 200): one statement."""
    sql = (
        "SELECT count(*) FROM (SELECT value FROM readings LIMIT %s) AS r "
        f"WHERE value >= 100 AND value < 200 {comment}"
    )
    with conn.cursor() as cur:
        cur.execute(sql.encode(), (rows,))
        row = cur.fetchone()
    return int(row[0]) if row else 0


def register(app: Flask, dsn: str | None) -> None:
    """Adds `GET /api/scan` to the app; it answers 503 when dsn is None."""
    connections = ThreadConnections(dsn) if dsn is not None else None

    @app.get("/api/scan")
    def scan_rows() -> ResponseReturnValue:
        rows = int_arg("rows", DEFAULT_ROWS, 1, MAX_ROWS)
        if rows is None:
            return jsonify(error=f"rows must be an integer 1..{MAX_ROWS}"), 400
        if connections is None:
            return jsonify(error="no database: the app runs without PINCHPOINT_DEMO_PG"), 503
        import psycopg

        try:
            n = scan(connections.get(), rows, sql_comment(request_tag()))
        except psycopg.Error as e:
            connections.drop()
            return jsonify(error=f"database: {e}"), 503
        return jsonify(rows=rows, matched=n)


def rows_for(dsn: str, ms: float, samples: int = 7) -> int:
    """The rows a scan covers in about `ms` of the database's time on this machine: the
    median of `samples` timed scans of CALIBRATION_ROWS, scaled (the scan is linear)."""
    import psycopg

    times = []
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        scan(conn, CALIBRATION_ROWS, "")  # the table into shared buffers
        for _ in range(samples):
            started = time.perf_counter()
            scan(conn, CALIBRATION_ROWS, "")
            times.append(time.perf_counter() - started)
    per_ms = CALIBRATION_ROWS / (statistics.median(times) * 1000)
    return max(1, min(MAX_ROWS, round(per_ms * ms)))
