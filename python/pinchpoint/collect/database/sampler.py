"""Samples a PostgreSQL server from inside while the load runs: its backends
(pg_stat_activity), the locks they wait for and who holds them (pg_locks,
pg_blocking_pids) `rate` times a second, and pg_stat_statements about once a second
where it is installed.

Bounded: one connection per database component, in a thread of its own, read-only, each
statement cut off by statement_timeout; at most MAX_ROWS rows kept. It never blocks the
run: the thread connects on its own, and stopping waits for it a moment at most. Every
failure (no DSN, no psycopg, a refused connection, a statement that failed) becomes a
problem the run reports as a warning; the run goes on with what was sampled.
"""

from __future__ import annotations

import contextlib
import threading
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
from pinchpoint.plan.database import Database

# What one statement of the sampler may take, and the connection's setup.
STATEMENT_TIMEOUT_MS = 500
CONNECT_TIMEOUT_S = 3
# How often pg_stat_statements is read, and how many of its statements.
STATEMENTS_EVERY_S = 1.0
STATEMENTS_LIMIT = 100
# The most rows of backends kept per component (a long run with many backends).
MAX_ROWS = 1_000_000
# After a failure, the next attempt to connect waits this long.
RETRY_S = 2.0
# How long stopping waits for the sampler's thread to end.
JOIN_S = 2.0
APPLICATION_NAME = "pinchpoint-sampler"


class DatabaseSampler:
    """Samples one database component's server in a thread of its own."""

    def __init__(self, component: str, database: Database) -> None:
        self.component = component
        self.database = database
        self.rows: list[dict[str, Any]] = []
        self.statements: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.statements_source: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._column: str | None = None
        self._failures = 0

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
        self._thread = threading.Thread(
            target=self._run, args=(dsn,), name=f"pinchpoint-db-{self.component}", daemon=True
        )
        self._thread.start()

    def _driver_missing(self) -> str | None:
        """Why the server's client library cannot be used; None when it can."""
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg is not installed (pip install 'psycopg[binary]')"
        return None

    def stop(self) -> None:
        """Stops sampling; waits for the thread JOIN_S at most."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_S)
            if self._thread.is_alive():
                self._problem("the sampler did not stop in time; its last sample is left out")

    def _problem(self, text: str) -> None:
        self.problems.append(f"database {self.component}: {text}")

    def _run(self, dsn: str) -> None:
        period = 1.0 / self.database.rate
        next_statements = 0.0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                if self._connected(dsn):
                    self._sample()
                    if self._column is not None and began >= next_statements:
                        self._read_statements()
                        next_statements = began + STATEMENTS_EVERY_S
                if len(self.rows) >= MAX_ROWS:
                    self._problem(f"sampling stopped at {MAX_ROWS} rows")
                    break
                self._stop.wait(max(0.0, period - (time.monotonic() - began)))
            if self._column is not None and self._conn is not None:
                self._read_statements()  # the run's last statements
        finally:
            self._close()

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

    def _failed(self, text: str) -> None:
        """Records the first failures, drops the connection and waits before the next."""
        self._failures += 1
        if self._failures <= 3:
            self._problem(text)
        self._close()
        self._stop.wait(RETRY_S)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closing a broken connection: nothing is left to do when it fails.
            with contextlib.suppress(Exception):
                conn.close()


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
