"""What the sampler asks a MySQL or MariaDB server, and its rows as the same `Backend` and
`Statement` values PostgreSQL's give (queries.py), so that one sample's rows and their
analysis are the same for both.

A connection (PROCESSLIST) is a backend: running a statement is `active`, asleep inside an
InnoDB transaction (INNODB_TRX) `idle in transaction`, else `idle`. One waiting for a
row or table lock has the wait type `Lock`, its lock (InnoDB's type and mode, its table)
and the connections whose transactions block it: from performance_schema.data_lock_waits
(MySQL 8) or information_schema.INNODB_LOCK_WAITS (MariaDB, MySQL 5.7). A connection's
statement is the one it runs; for one asleep in its transaction, the last one it ran
(performance_schema.events_statements_current, where that consumer is on).

Statements by time: performance_schema.events_statements_summary_by_digest, the totals
per digest (SUM_TIMER_WAIT in picoseconds). Every query reads only these views: the
PROCESS privilege shows every connection and InnoDB's transactions, and SELECT on
performance_schema its tables.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pinchpoint.collect.database.queries import Backend, Statement

CONNECTIONS_SQL = """
SELECT p.ID, p.COMMAND, p.INFO, t.trx_id
FROM information_schema.PROCESSLIST p
LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
WHERE p.ID <> CONNECTION_ID() AND p.COMMAND NOT IN ('Daemon', 'Binlog Dump', 'Killed')
"""

# The waits for a lock: who waits, who blocks it, and the lock waited for.
LOCK_WAITS_SQL = {
    "data_lock_waits": """
SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, l.LOCK_TYPE, l.LOCK_MODE,
       CONCAT(l.OBJECT_SCHEMA, '.', l.OBJECT_NAME)
FROM performance_schema.data_lock_waits w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID
LEFT JOIN performance_schema.data_locks l ON l.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
""",
    "innodb_lock_waits": """
SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, l.lock_type, l.lock_mode,
       REPLACE(l.lock_table, '`', '')
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.INNODB_LOCKS l ON l.lock_id = w.requested_lock_id
""",
}

# The last statement of each connection (needs the events_statements_current consumer).
LAST_STATEMENTS_SQL = """
SELECT t.PROCESSLIST_ID, s.SQL_TEXT
FROM performance_schema.threads t
JOIN performance_schema.events_statements_current s ON s.THREAD_ID = t.THREAD_ID
WHERE t.PROCESSLIST_ID IS NOT NULL AND s.SQL_TEXT IS NOT NULL
"""

# The sampler's own statements read these schemas; the apps' seldom do.
DIGESTS_SQL = """
SELECT SCHEMA_NAME, DIGEST, DIGEST_TEXT, COUNT_STAR, SUM_TIMER_WAIT
FROM performance_schema.events_statements_summary_by_digest
WHERE DIGEST IS NOT NULL AND DIGEST_TEXT NOT LIKE '%%performance_schema%%'
  AND DIGEST_TEXT NOT LIKE '%%information_schema%%'
ORDER BY SUM_TIMER_WAIT DESC
LIMIT %s
"""

PICOSECONDS_PER_MS = 1e9


def _rows(conn: Any, sql: str, args: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cursor:
        cursor.execute(sql, args)
        return list(cursor.fetchall())


def lock_waits_source(conn: Any) -> str | None:
    """Which view names the lock waits: data_lock_waits (MySQL 8), innodb_lock_waits
    (MariaDB, MySQL 5.7); None when neither can be read."""
    probes = {
        "data_lock_waits": "SELECT 1 FROM performance_schema.data_lock_waits LIMIT 0",
        "innodb_lock_waits": "SELECT 1 FROM information_schema.INNODB_LOCK_WAITS LIMIT 0",
    }
    import pymysql

    for name, sql in probes.items():
        try:
            _rows(conn, sql)
        except pymysql.Error:
            continue
        return name
    return None


def can_read(conn: Any, sql: str) -> bool:
    """Whether `sql` runs (a view that is there, readable, its consumer on)."""
    import pymysql

    try:
        _rows(conn, sql)
    except pymysql.Error:
        return False
    return True


def connections(conn: Any, waits_source: str | None, last_statements: bool) -> list[Backend]:
    """The server's client connections but the sampler's, as backends."""
    waits: dict[int, list[tuple[Any, ...]]] = {}
    if waits_source is not None:
        for row in _rows(conn, LOCK_WAITS_SQL[waits_source]):
            waits.setdefault(int(row[0]), []).append(row)
    last = dict(_rows(conn, LAST_STATEMENTS_SQL)) if last_statements else {}
    return [_backend(row, waits.get(int(row[0]), []), last) for row in _rows(conn, CONNECTIONS_SQL)]


def _backend(row: tuple[Any, ...], waits: list[tuple[Any, ...]], last: dict[Any, Any]) -> Backend:
    pid, command, info, trx_id = int(row[0]), str(row[1]), row[2], row[3]
    running = command not in ("Sleep", "Connect")
    state = "active" if running else "idle in transaction" if trx_id is not None else "idle"
    query = _text(info) if running and info is not None else _text(last.get(pid))
    first = waits[0] if waits else None
    return Backend(
        pid=pid,
        state=state,
        wait_event_type="Lock" if first else None,
        wait_event=str(first[2]) if first and first[2] else ("lock" if first else None),
        query=query,
        blockers=tuple(dict.fromkeys(int(w[1]) for w in waits)),
        lock_type=first[2] if first else None,
        lock_mode=first[3] if first else None,
        lock_relation=first[4] if first else None,
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def digests(conn: Any, limit: int) -> list[Statement]:
    """The `limit` statement digests with the most time, the sampler's own left out."""
    return [
        Statement(
            queryid=_digest_id(row[0], row[1]),
            query=_text(row[2]),
            calls=int(row[3] or 0),
            exec_ms=float(row[4] or 0) / PICOSECONDS_PER_MS,
        )
        for row in _rows(conn, DIGESTS_SQL, (limit,))
    ]


def _digest_id(schema: Any, digest: Any) -> int:
    """A digest and its schema as one signed 64-bit id (the digest alone is per schema)."""
    key = f"{_text(schema) or ''}\0{_text(digest)}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big", signed=True)
