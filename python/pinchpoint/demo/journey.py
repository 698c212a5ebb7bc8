"""The demo app's shop journey: log in, list one's orders, read one, post a note on it.

Seeded: accounts `user0`..`user199` with passwords `pw-0`..`pw-199`; each has 3 orders,
user N's with ids 3N+1, 3N+2, 3N+3, over the items table. Logins live in SQLite, so a
token or session from one worker process is good in every other. Every response of
these endpoints carries `X-Served-By: <pid of the worker process>`; errors are JSON
`{"error": "<message>"}`.

- `POST /api/login`, JSON `{"user": "user7", "password": "pw-7"}` or form
  `user=user7&password=pw-7`: 200 `{"token": "<hex>", "user": "user7"}` and the cookie
  `session=<hex>; Path=/; HttpOnly`; 401 for a wrong user or password, 400 without both.
- `GET /api/orders`, header `Authorization: Bearer <token>`: 200
  `{"orders": [{"id": 22, "item": <item id>, "qty": 2}, ...]}`, by id; 401 without a
  valid token.
- `GET /api/orders/<id>`, the same header: 200
  `{"id": 22, "user": "user7", "item": {"id": .., "name": .., "price": ..}, "qty": 2}`;
  404 when the order is not the user's, 401 without a valid token.
- `POST /api/orders/<id>/notes`, the `session` cookie and form `note=<1..500 chars>`:
  201 `<p>noted <id></p>` (text/html); 401 without a valid session, 400 for a missing,
  empty or longer note, 404 when the order is not the session user's.

With `PINCHPOINT_DEMO_WRONG_EVERY=N` (read when the app is created), every Nth 200
answer of `GET /api/orders/<id>` in a worker process carries another order's id in `id`
(id % 600 + 1), still with status 200.
"""

from __future__ import annotations

import itertools
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable

from flask import Blueprint, Flask, Response, jsonify, make_response, request
from flask.typing import ResponseReturnValue

from pinchpoint.demo.env import WRONG_EVERY_ENV

ACCOUNTS = 200
ORDERS_PER_ACCOUNT = 3
ORDERS = ACCOUNTS * ORDERS_PER_ACCOUNT
MAX_NOTE_CHARS = 500
SESSION_COOKIE = "session"
SERVED_BY_HEADER = "X-Served-By"

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS accounts (
        id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, password TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS orders (
        id INTEGER PRIMARY KEY,
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        item_id INTEGER NOT NULL REFERENCES items (id),
        qty INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS orders_by_account ON orders (account_id)",
    """CREATE TABLE IF NOT EXISTS logins (
        token TEXT PRIMARY KEY,
        session TEXT NOT NULL UNIQUE,
        account_id INTEGER NOT NULL REFERENCES accounts (id))""",
    """CREATE TABLE IF NOT EXISTS notes (
        id INTEGER PRIMARY KEY,
        order_id INTEGER NOT NULL REFERENCES orders (id),
        account_id INTEGER NOT NULL REFERENCES accounts (id),
        note TEXT NOT NULL)""",
]


def user_name(n: int) -> str:
    return f"user{n}"


def password(n: int) -> str:
    return f"pw-{n}"


def order_ids(n: int) -> list[int]:
    """The ids of user n's seeded orders."""
    first = n * ORDERS_PER_ACCOUNT + 1
    return list(range(first, first + ORDERS_PER_ACCOUNT))


def init_tables(conn: sqlite3.Connection, item_count: int) -> None:
    """Creates the journey's tables and seeds accounts and orders once; run inside the
    caller's write transaction, after the items are seeded (orders use ids 1..item_count)."""
    for statement in _SCHEMA:
        conn.execute(statement)
    if conn.execute("SELECT COUNT(*) FROM accounts").fetchone()[0] > 0:
        return
    conn.executemany(
        "INSERT INTO accounts (id, name, password) VALUES (?, ?, ?)",
        [(n, user_name(n), password(n)) for n in range(ACCOUNTS)],
    )
    conn.executemany(
        "INSERT INTO orders (id, account_id, item_id, qty) VALUES (?, ?, ?, ?)",
        [
            (order_id, n, order_id * 7 % item_count + 1, 1 + (n + k) % 4)
            for n in range(ACCOUNTS)
            for k, order_id in enumerate(order_ids(n))
        ],
    )


def wrong_every_from_env() -> int:
    """PINCHPOINT_DEMO_WRONG_EVERY as a count, 0 when unset or empty."""
    text = os.environ.get(WRONG_EVERY_ENV, "").strip()
    try:
        value = int(text or "0")
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{WRONG_EVERY_ENV} must be a whole number >= 0, got {text!r}")
    return value


def register(
    app: Flask, db: Callable[[], sqlite3.Connection], wrong_every: int | None = None
) -> None:
    """Adds the journey's endpoints to the app; db gives the request's connection.
    wrong_every: see the module's docstring; None reads it from the environment."""
    every = wrong_every_from_env() if wrong_every is None else wrong_every
    answered = itertools.count(1)
    answered_lock = threading.Lock()
    journey = Blueprint("journey", __name__)

    def logged_in(column: str, value: str | None) -> sqlite3.Row | None:
        """The account of the login whose column (token or session) is value."""
        if not value:
            return None
        row: sqlite3.Row | None = (
            db()
            .execute(
                "SELECT a.id, a.name FROM logins l JOIN accounts a ON a.id = l.account_id"
                f" WHERE l.{column} = ?",
                (value,),
            )
            .fetchone()
        )
        return row

    def bearer_account() -> sqlite3.Row | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return logged_in("token", token.strip()) if scheme.lower() == "bearer" else None

    def session_account() -> sqlite3.Row | None:
        return logged_in("session", request.cookies.get(SESSION_COOKIE))

    @journey.post("/api/login")
    def login() -> ResponseReturnValue:
        body = request.get_json(silent=True) if request.is_json else None
        fields = body if isinstance(body, dict) else request.form
        user, given = fields.get("user"), fields.get("password")
        if not isinstance(user, str) or not isinstance(given, str):
            return _error(400, 'expected JSON {"user": .., "password": ..} or the same as a form')
        account = (
            db().execute("SELECT id, password FROM accounts WHERE name = ?", (user,)).fetchone()
        )
        if account is None or account["password"] != given:
            return _error(401, "wrong user or password")
        token, session = secrets.token_hex(16), secrets.token_hex(16)
        db().execute(
            "INSERT INTO logins (token, session, account_id) VALUES (?, ?, ?)",
            (token, session, account["id"]),
        )
        response = jsonify(token=token, user=user)
        response.set_cookie(SESSION_COOKIE, session, path="/", httponly=True)
        return response

    @journey.get("/api/orders")
    def list_orders() -> ResponseReturnValue:
        account = bearer_account()
        if account is None:
            return _error(401, "expected the header Authorization: Bearer <token from login>")
        rows = db().execute(
            "SELECT id, item_id AS item, qty FROM orders WHERE account_id = ? ORDER BY id",
            (account["id"],),
        )
        return jsonify(orders=[dict(row) for row in rows])

    @journey.get("/api/orders/<int:order_id>")
    def get_order(order_id: int) -> ResponseReturnValue:
        account = bearer_account()
        if account is None:
            return _error(401, "expected the header Authorization: Bearer <token from login>")
        row = (
            db()
            .execute(
                "SELECT o.qty, i.id, i.name, i.price FROM orders o JOIN items i ON i.id = o.item_id"
                " WHERE o.id = ? AND o.account_id = ?",
                (order_id, account["id"]),
            )
            .fetchone()
        )
        if row is None:
            return _error(404, f"no order {order_id} of {account['name']}")
        with answered_lock:
            n = next(answered)
        shown_id = order_id % ORDERS + 1 if every and n % every == 0 else order_id
        item = {"id": row["id"], "name": row["name"], "price": row["price"]}
        return jsonify(id=shown_id, user=account["name"], item=item, qty=row["qty"])

    @journey.post("/api/orders/<int:order_id>/notes")
    def add_note(order_id: int) -> ResponseReturnValue:
        account = session_account()
        if account is None:
            return _error(401, f"expected the {SESSION_COOKIE} cookie from login")
        note = request.form.get("note")
        if not note or len(note) > MAX_NOTE_CHARS:
            return _error(400, f"expected the form field note, 1..{MAX_NOTE_CHARS} characters")
        owned = (
            db()
            .execute(
                "SELECT 1 FROM orders WHERE id = ? AND account_id = ?", (order_id, account["id"])
            )
            .fetchone()
        )
        if owned is None:
            return _error(404, f"no order {order_id} of {account['name']}")
        db().execute(
            "INSERT INTO notes (order_id, account_id, note) VALUES (?, ?, ?)",
            (order_id, account["id"], note),
        )
        response = make_response(f"<p>noted {order_id}</p>", 201)
        response.content_type = "text/html; charset=utf-8"
        return response

    @journey.after_request
    def served_by(response: Response) -> Response:
        response.headers[SERVED_BY_HEADER] = str(os.getpid())
        return response

    app.register_blueprint(journey)


def _error(status: int, message: str) -> ResponseReturnValue:
    return jsonify(error=message), status
