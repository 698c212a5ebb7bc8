"""What the sampler asks PostgreSQL, and the rows it gets back as plain values.

Every query reads the statistics views only (pg_stat_activity, pg_locks, pg_class,
pg_stat_statements): a role with `pg_monitor` (or `pg_read_all_stats`) sees every
backend's statement; another sees `<insufficient privilege>` for those of other roles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Marks the sampler's own statements, so pg_stat_statements' list leaves them out.
MARK = "/* pinchpoint-sampler */"

# The backends of the DSN's database, the sampler's own left out; a backend waiting for a
# lock with the lock it waits for and the backends that block it.
ACTIVITY_SQL = f"""{MARK}
SELECT a.pid, a.state, a.wait_event_type, a.wait_event, a.query,
       CASE WHEN a.wait_event_type = 'Lock' THEN pg_blocking_pids(a.pid) END,
       l.locktype, l.mode, l.relation::regclass::text
FROM pg_stat_activity a
LEFT JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted
WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
  AND a.datname = current_database()
"""

# The tables (not indexes) each of `pids` holds a lock on that is more than a read's.
HELD_TABLES_SQL = f"""{MARK}
SELECT l.pid, l.relation::regclass::text
FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
WHERE l.granted AND l.locktype = 'relation' AND l.mode <> 'AccessShareLock'
  AND c.relkind IN ('r', 'p', 'm') AND l.pid = ANY(%s)
"""

# pg_stat_statements' time column: total_exec_time from PostgreSQL 13, total_time before.
STATEMENTS_COLUMN_SQL = f"""{MARK}
SELECT a.attname FROM pg_attribute a
WHERE a.attrelid = 'pg_stat_statements'::regclass
  AND a.attname IN ('total_exec_time', 'total_time')
"""

STATEMENTS_SQL = f"""{MARK}
SELECT queryid, query, calls, {{column}}
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND queryid IS NOT NULL AND query NOT LIKE '%%pinchpoint-sampler%%'
ORDER BY {{column}} DESC
LIMIT %s
"""


@dataclass(frozen=True)
class Backend:
    """One client backend as pg_stat_activity and pg_locks show it."""

    pid: int
    state: str | None
    wait_event_type: str | None
    wait_event: str | None
    query: str | None
    blockers: tuple[int, ...]
    lock_type: str | None
    lock_mode: str | None
    lock_relation: str | None

    @property
    def waits_for_lock(self) -> bool:
        return self.wait_event_type == "Lock"


@dataclass(frozen=True)
class Statement:
    """One row of pg_stat_statements."""

    queryid: int
    query: str | None
    calls: int
    exec_ms: float


def activity(conn: Any) -> list[Backend]:
    """The client backends of the DSN's database."""
    rows = conn.execute(ACTIVITY_SQL).fetchall()
    return [
        Backend(
            pid=int(r[0]),
            state=r[1],
            wait_event_type=r[2],
            wait_event=r[3],
            query=r[4],
            blockers=tuple(int(p) for p in r[5] or ()),
            lock_type=r[6],
            lock_mode=r[7],
            lock_relation=r[8],
        )
        for r in rows
    ]


def held_tables(conn: Any, pids: list[int]) -> dict[int, set[str]]:
    """Per backend of `pids`, the tables it holds a lock on that is more than a read's."""
    held: dict[int, set[str]] = {pid: set() for pid in pids}
    for pid, relation in conn.execute(HELD_TABLES_SQL, (pids,)).fetchall():
        held.setdefault(int(pid), set()).add(str(relation))
    return held


def statements_column(conn: Any) -> str | None:
    """pg_stat_statements' total time column; None when the view cannot be read (not
    installed in the database, or not loaded by the server)."""
    rows = conn.execute(STATEMENTS_COLUMN_SQL).fetchall()
    names = {r[0] for r in rows}
    column = next((c for c in ("total_exec_time", "total_time") if c in names), None)
    if column is not None:
        conn.execute(f"{MARK} SELECT 1 FROM pg_stat_statements LIMIT 1").fetchall()
    return column


def statements(conn: Any, column: str, limit: int) -> list[Statement]:
    """The `limit` statements of the DSN's database with the most execution time."""
    rows = conn.execute(STATEMENTS_SQL.format(column=column), (limit,)).fetchall()
    return [Statement(int(r[0]), r[1], int(r[2] or 0), float(r[3] or 0.0)) for r in rows]
