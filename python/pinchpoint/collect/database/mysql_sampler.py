"""Samples a MySQL or MariaDB server from inside while the load runs (`kind = "mysql"`):
its connections, the InnoDB locks they wait for and who holds them `rate` times a
second, and the statement digests' time (performance_schema) about once a second where
performance_schema is on (MySQL's default; MariaDB's needs `performance_schema=ON`).

The same thread, bounds and warnings as PostgreSQL's sampler (sampler.py), through
PyMySQL; the connection is read-only (`SET SESSION TRANSACTION READ ONLY`) and each of its
statements cut off by max_statement_time (MariaDB) or max_execution_time (MySQL).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from pinchpoint.collect.database.mysql_queries import (
    DIGESTS_SQL,
    LAST_STATEMENTS_SQL,
    can_read,
    connections,
    digests,
    lock_waits_source,
)
from pinchpoint.collect.database.mysql_text import normalize_mysql
from pinchpoint.collect.database.rows import sample_rows
from pinchpoint.collect.database.sampler import (
    CONNECT_TIMEOUT_S,
    STATEMENT_TIMEOUT_MS,
    STATEMENTS_LIMIT,
    DatabaseSampler,
    first_line,
)

DEFAULT_PORT = 3306
STATEMENTS_SOURCE = "performance_schema"


@dataclass(frozen=True)
class MysqlAddress:
    """Where a MySQL server listens and who the sampler logs in as."""

    host: str
    port: int
    user: str | None
    password: str | None
    database: str | None
    unix_socket: str | None


def parse_dsn(dsn: str) -> MysqlAddress:
    """The address of a `mysql://[user[:password]@]host[:port][/database]` URL (with
    `?unix_socket=/path` for a socket); ValueError saying what is wrong, never quoting it."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError("the DSN must be a mysql://user:password@host:port/database URL")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError("the DSN's port is not a number from 1 to 65535") from None
    socket = parse_qs(parts.query).get("unix_socket", [None])[0]
    if not parts.hostname and socket is None:
        raise ValueError("the DSN names no host (nor a unix_socket)")
    return MysqlAddress(
        host=parts.hostname or "localhost",
        port=port,
        user=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password is not None else None,
        database=unquote(parts.path.lstrip("/")) or None,
        unix_socket=socket,
    )


class MysqlSampler(DatabaseSampler):
    """Samples one MySQL or MariaDB component's server in a thread of its own."""

    _waits_source: str | None = None
    _last_statements = False

    def _driver_missing(self) -> str | None:
        try:
            import pymysql  # noqa: F401
        except ImportError:
            return "PyMySQL is not installed (pip install 'pinchpoint[mysql]')"
        return None

    def _connected(self, dsn: str) -> bool:
        if self._conn is not None:
            return True
        import pymysql

        try:
            address = parse_dsn(dsn)
        except ValueError as e:
            self._failed(f"{self.database.source()}: {e}")
            return False
        try:
            self._conn = pymysql.connect(
                host=address.host,
                port=address.port,
                user=address.user,
                password=address.password or "",
                database=address.database,
                unix_socket=address.unix_socket,
                connect_timeout=CONNECT_TIMEOUT_S,
                read_timeout=CONNECT_TIMEOUT_S,
                autocommit=True,
                program_name="pinchpoint-sampler",
            )
            self._limit_session()
        except pymysql.Error as e:
            self._failed(f"cannot connect: {first_line(e)}")
            return False
        self._waits_source = lock_waits_source(self._conn)
        self._last_statements = can_read(self._conn, LAST_STATEMENTS_SQL + " LIMIT 0")
        readable = can_read(self._conn, DIGESTS_SQL % 0)
        self._column = STATEMENTS_SOURCE if readable else None
        self.statements_source = STATEMENTS_SOURCE if readable else "samples"
        return True

    def _limit_session(self) -> None:
        """Read-only, each statement cut off: MariaDB's variable in seconds, MySQL's in ms."""
        import pymysql

        with self._conn.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION READ ONLY")
            try:
                cursor.execute(f"SET SESSION max_statement_time = {STATEMENT_TIMEOUT_MS / 1000}")
            except pymysql.Error:
                cursor.execute(f"SET SESSION max_execution_time = {STATEMENT_TIMEOUT_MS}")

    def _sample(self) -> None:
        import pymysql

        try:
            backends = connections(self._conn, self._waits_source, self._last_statements)
        except pymysql.Error as e:
            self._failed(f"sampling failed: {first_line(e)}")
            return
        rows = sample_rows(time.time(), self.component, backends, {}, normalize_mysql)
        self.rows.extend(rows)

    def _read_statements(self) -> None:
        import pymysql

        try:
            found = digests(self._conn, STATEMENTS_LIMIT)
        except pymysql.Error as e:
            self._failed(f"reading performance_schema failed: {first_line(e)}")
            return
        self.statements.extend(self._statement_rows(found, normalize_mysql))
