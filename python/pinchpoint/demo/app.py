"""The demo Flask app: a small item catalogue in SQLite, with the probe mounted.

Run under gunicorn as ``gunicorn 'pinchpoint.demo.app:wsgi()'`` with ``PINCHPOINT_DEMO_DB``
and ``PINCHPOINT_PROBE_LOG`` set.

`GET` or `POST /api/fsync?kb=64&n=1` is disk-bound work: n times, append kb KiB to
`fsync.data` beside the database and fsync it (kb ≤ 1024, n ≤ 16; the file is emptied
once past 64 MiB). On the machine this was written on (ext4 on a virtual disk), one
fsync of 64 KiB took about 0.2 ms alone; under concurrent writers each waits for the
journal's commits, so the time grows with the writers rather than with the CPU.
"""

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from flask import Flask, g, jsonify, request
from flask.typing import ResponseReturnValue

from pinchpoint.demo import checkout, hot, journey, scan
from pinchpoint.demo.env import DB_ENV, PG_DSN_ENV, PROBE_LOG_ENV
from pinchpoint.demo.query import int_arg
from pinchpoint.probe import ProbeWSGI

SEED_ROWS = 500
MAX_LIMIT = 1000
MAX_FSYNC_KB = 1024
MAX_FSYNC_N = 16
FSYNC_FILE = "fsync.data"
_FSYNC_FILE_MAX_BYTES = 64 << 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    price REAL NOT NULL
)
"""


def create_app(db_path: Path | str, probe_log: Path | str, pg_dsn: str | None = None) -> Flask:
    """The demo app, its database created and seeded if new, the probe logging to probe_log;
    with pg_dsn, `POST /api/hot` updates a hot row in that PostgreSQL database and
    `GET /api/scan` scans rows of a table there (demo/scan.py). The shop
    journey's endpoints are in demo/journey.py; `POST /api/checkout`, serialized across
    the app's processes, in demo/checkout.py."""
    db_path = Path(db_path)
    init_db(db_path)
    app = Flask("pinchpoint.demo")
    app.wsgi_app = ProbeWSGI(app.wsgi_app, log_path=str(probe_log))  # type: ignore[method-assign]

    def db() -> sqlite3.Connection:
        if "db" not in g:
            g.db = _connect(db_path)
        return g.db

    @app.teardown_appcontext
    def close_db(_exc: BaseException | None) -> None:
        conn = g.pop("db", None)
        if conn is not None:
            conn.close()

    @app.get("/healthz")
    def healthz() -> ResponseReturnValue:
        return "ok\n"

    @app.get("/api/items")
    def list_items() -> ResponseReturnValue:
        limit = int_arg("limit", 20)
        offset = int_arg("offset", 0)
        if limit is None or not 1 <= limit <= MAX_LIMIT or offset is None or offset < 0:
            return _error(400, f"limit must be an integer 1..{MAX_LIMIT}, offset one >= 0")
        rows = db().execute(
            "SELECT id, name, price FROM items ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
        )
        return jsonify(items=[dict(row) for row in rows])

    @app.get("/api/items/<int:item_id>")
    def get_item(item_id: int) -> ResponseReturnValue:
        row = db().execute("SELECT id, name, price FROM items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            return _error(404, f"no item {item_id}")
        return jsonify(dict(row))

    @app.post("/api/items")
    def add_item() -> ResponseReturnValue:
        body: Any = request.get_json(silent=True)
        name = body.get("name") if isinstance(body, dict) else None
        price = body.get("price") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name or not isinstance(price, int | float):
            return _error(400, 'expected JSON {"name": <non-empty string>, "price": <number>}')
        cur = db().execute("INSERT INTO items (name, price) VALUES (?, ?)", (name, price))
        return jsonify(id=cur.lastrowid, name=name, price=price), 201

    @app.route("/api/fsync", methods=["GET", "POST"])
    def fsync() -> ResponseReturnValue:
        kb, n = int_arg("kb", 64), int_arg("n", 1)
        if kb is None or n is None or not 1 <= kb <= MAX_FSYNC_KB or not 1 <= n <= MAX_FSYNC_N:
            return _error(400, f"kb must be an integer 1..{MAX_FSYNC_KB}, n one 1..{MAX_FSYNC_N}")
        return jsonify(kb=kb, n=n, fsync_s=append_and_sync(db_path.with_name(FSYNC_FILE), kb, n))

    hot.register(app, pg_dsn)
    scan.register(app, pg_dsn)
    journey.register(app, db)
    checkout.register(app, db_path.with_name(checkout.LOCK_FILE))
    return app


def append_and_sync(path: Path, kb: int, n: int) -> float:
    """n times: appends kb KiB to path and fsyncs it; the seconds spent in fsync."""
    chunk = b"\0" * (kb * 1024)
    spent = 0.0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for _ in range(n):
            os.write(fd, chunk)
            started = time.perf_counter()
            os.fsync(fd)
            spent += time.perf_counter() - started
        if os.fstat(fd).st_size > _FSYNC_FILE_MAX_BYTES:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return spent


def wsgi() -> Flask:
    """The app configured from the environment, for gunicorn's ``module:wsgi()`` syntax."""
    missing = [name for name in (DB_ENV, PROBE_LOG_ENV) if not os.environ.get(name)]
    if missing:
        raise RuntimeError(f"pinchpoint demo app: set {' and '.join(missing)}")
    return create_app(os.environ[DB_ENV], os.environ[PROBE_LOG_ENV], os.environ.get(PG_DSN_ENV))


def init_db(db_path: Path) -> None:
    """Creates the tables (the items, the journey's) and seeds them once, safe when several
    workers start together."""
    conn = _connect(db_path)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        # BEGIN IMMEDIATE takes the write lock up front, so only one worker seeds.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(_SCHEMA)
        if conn.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 0:
            rows = [(f"item {i}", 1 + (i * 37 % 1000) / 10) for i in range(1, SEED_ROWS + 1)]
            conn.executemany("INSERT INTO items (name, price) VALUES (?, ?)", rows)
        journey.init_tables(conn, SEED_ROWS)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db_path, timeout=30, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


def _error(status: int, message: str) -> ResponseReturnValue:
    return jsonify(error=message), status
