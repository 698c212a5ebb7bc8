"""Samples a PostgreSQL server from inside while the load runs: its backends
(pg_stat_activity), the locks they wait for and who holds them (pg_locks,
pg_blocking_pids) `rate` times a second, and pg_stat_statements about once a second
where it is installed.

One connection per database component, read-only, each statement cut off by
statement_timeout, in the bounded thread of collect/sampler_thread.py. Every failure (no
DSN, no psycopg, a refused connection, a statement that failed) becomes a problem the run
reports as a warning; the run goes on with what was sampled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pinchpoint.collect.database.normalize import normalize
from pinchpoint.collect.database.queries import (
    Statement,
    activity,
    held_tables,
    statements,
    statements_column,
)
from pinchpoint.collect.database.rows import needs_tables, sample_rows
from pinchpoint.collect.sampler_thread import SamplerThread
from pinchpoint.plan.database import Database

# What one statement of the sampler may take, and the connection's setup.
STATEMENT_TIMEOUT_MS = 500
CONNECT_TIMEOUT_S = 3
# How many of pg_stat_statements' statements are read each time.
STATEMENTS_LIMIT = 100
APPLICATION_NAME = "pinchpoint-sampler"


class DatabaseSampler(SamplerThread):
    """Samples one database component's server in a thread of its own."""

    kind = "database"

    def __init__(self, component: str, database: Database) -> None:
        super().__init__(component, database.rate)
        self.database = database
        self.rows: list[dict[str, Any]] = []
        self.statements: list[dict[str, Any]] = []
        self.statements_source: str | None = None
        self._column: str | None = None

    def start(self) -> None:
        """Starts the thread; a missing DSN or psycopg is a problem, not an error."""
        dsn = self.database.dsn()
        if dsn is None:
            self._problem(f"{self.database.dsn_env} is not set: the database was not sampled")
            return
        missing = self._driver_missing()
        if missing is not None:
            self._problem(missing)
            return
        self._start(dsn)

    def _driver_missing(self) -> str | None:
        """Why the server's client library cannot be used; None when it can."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg is not installed (pip install 'psycopg[binary]')"
        return None

    def _kept(self) -> int:
        return len(self.rows)

    def _slow_read_on(self) -> bool:
        return self._column is not None

    def _slow_read(self) -> None:
        self._read_statements()

    def _connected(self, dsn: str) -> bool:
        """Whether a connection is open, making one when the last failure is old enough."""
        if self._conn is not None:
            return True
        import psycopg

        try:
            self._conn = psycopg.connect(
                dsn,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=APPLICATION_NAME,
                options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS} "
                "-c default_transaction_read_only=on -c lock_timeout=100",
            )
        except psycopg.Error as e:
            self._failed(f"cannot connect: {first_line(e)}")
            return False
        self._column = self._statements_column()
        return True

    def _statements_column(self) -> str | None:
        import psycopg

        try:
            column = statements_column(self._conn)
        except psycopg.Error:
            column = None
        self.statements_source = "pg_stat_statements" if column else "samples"
        return column

    def _sample(self) -> None:
        import psycopg

        try:
            backends = activity(self._conn)
            pids = needs_tables(backends)
            held = held_tables(self._conn, pids) if pids else {}
        except psycopg.Error as e:
            self._failed(f"sampling failed: {first_line(e)}")
            return
        self.rows.extend(sample_rows(time.time(), self.component, backends, held))

    def _read_statements(self) -> None:
        import psycopg

        assert self._column is not None
        try:
            found = statements(self._conn, self._column, STATEMENTS_LIMIT)
        except psycopg.Error as e:
            self._failed(f"reading pg_stat_statements failed: {first_line(e)}")
            return
        self.statements.extend(self._statement_rows(found, normalize))

    def _statement_rows(
        self, found: list[Statement], normalizer: Callable[[str], str]
    ) -> list[dict[str, Any]]:
        now = time.time()
        return [
            {
                "ts": now,
                "component": self.component,
                "queryid": s.queryid,
                "statement": normalizer(s.query) if s.query else None,
                "calls": s.calls,
                "exec_ms": s.exec_ms,
            }
            for s in found
        ]


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
