"""The demo app's hot-row endpoint: every request updates the same database row.

`POST /api/hot?hold=5` runs, in one PostgreSQL transaction,
`UPDATE counters SET n = n + 1 WHERE id = 1` and then `hold` ms of work while it holds
the row's lock, so concurrent requests queue for that lock: row-lock contention. Each
statement carries the run's tag in a sqlcommenter comment, so the database's statement
log is matched to the run. Each worker process keeps one connection.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, cast

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue

from pinchpoint.logformats.tag import Tag, find_tag, parse_header

COUNTERS_SQL = """
CREATE TABLE IF NOT EXISTS counters (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO counters VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
"""
DEFAULT_HOLD_MS = 5
MAX_HOLD_MS = 1000


def sql_comment(tag: Tag | None) -> str:
    """The tag as a sqlcommenter comment (`/*pp_run='r1',pp_users='4',pp_req='17'*/`;
    an open-loop run's tag has `pp_rate` instead of `pp_users`)."""
    if tag is None:
        return ""
    level = f"pp_rate='{tag.rate:g}'" if tag.rate is not None else f"pp_users='{tag.users}'"
    fields = [f"pp_run='{tag.run_id}'", level]
    if tag.req_id is not None:
        fields.append(f"pp_req='{tag.req_id}'")
    return "/*" + ",".join(fields) + "*/"


def request_tag() -> Tag | None:
    """The run's tag of the current request, from its query or its X-Pinchpoint header."""
    tag = find_tag(request.query_string.decode("latin-1"))
    header = request.headers.get("X-Pinchpoint")
    return tag if tag is not None or header is None else parse_header(header)


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
    connections: dict[tuple[int, int], Any] = {}
    if dsn is not None:
        # Imported now: a server that preloads the app (gunicorn --preload, uWSGI without
        # lazy-apps) imports it once, not in every worker's first request.
        import psycopg  # noqa: F401

    def connection() -> Any:
        import psycopg

        # One per thread (gthread, uWSGI threads: a transaction must not share its
        # connection), and one made before a fork is not this process's.
        key = (os.getpid(), threading.get_ident())
        conn = connections.get(key)
        if conn is None or conn.closed:
            conn = connections[key] = psycopg.connect(
                cast(str, dsn), autocommit=True, connect_timeout=10
            )
        return conn

    @app.post("/api/hot")
    def hot() -> ResponseReturnValue:
        hold = _hold_ms()
        if hold is None:
            return jsonify(error=f"hold must be an integer 0..{MAX_HOLD_MS} (ms)"), 400
        if dsn is None:
            return jsonify(error="no database: the app runs without PINCHPOINT_DEMO_PG"), 503
        import psycopg

        try:
            n = bump(connection(), hold / 1000, sql_comment(request_tag()))
        except psycopg.Error as e:
            connections.pop((os.getpid(), threading.get_ident()), None)
            return jsonify(error=f"database: {e}"), 503
        return jsonify(n=n)


def _hold_ms() -> int | None:
    text = request.args.get("hold")
    if text is None:
        return DEFAULT_HOLD_MS
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 <= value <= MAX_HOLD_MS else None
