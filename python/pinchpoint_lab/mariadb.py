"""A throwaway MariaDB server on 127.0.0.1 for the tests that sample MySQL from inside.

    with MariadbServer() as db:
        db.execute("CREATE TABLE shop.counters (id INT PRIMARY KEY, n INT)")
        sampler = MysqlSampler("mariadb", Database(dsn_env=db.dsn_env, kind="mysql"))

mariadb-install-db makes the data folder in a new folder under the system's temp folder,
mariadbd serves it on a free loopback port (as the `mysql` user when pinchpoint is root)
with performance_schema on, its events_statements_current consumer among it (so an idle
holder's last statement is seen), and the slow log of every statement; the folder is
removed on exit.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.procs import Child
from pinchpoint_lab.data_server import DataServer
from pinchpoint_lab.ports import HOST

DATABASE = "shop"
SLOW_LOG = "slow.log"


def find_mariadb() -> tuple[Path, Path] | None:
    """mariadb-install-db and mariadbd (Debian's layout or PATH); None when not installed."""
    install = shutil.which("mariadb-install-db")
    server = shutil.which("mariadbd") or next(
        (p for p in ("/usr/sbin/mariadbd", "/usr/sbin/mysqld") if os.access(p, os.X_OK)), None
    )
    if install is None or server is None:
        return None
    return Path(install), Path(server)


def _server_user() -> str | None:
    """mariadbd refuses to run as root but with --user: the `mysql` user then."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("mysql")
    except KeyError:
        raise StackError("running as root with no mysql user to run MariaDB as") from None
    return "mysql"


class MariadbServer(DataServer):
    """mariadb-install-db + mariadbd on 127.0.0.1 and a free port; stopped and removed on
    exit. While it runs, its DSN (as root, database `shop`) is in `dsn_env`."""

    title = "MariaDB"

    def __init__(self, startup_timeout_s: float = 60.0) -> None:
        super().__init__(startup_timeout_s)

    @property
    def dsn_env(self) -> str:
        return f"PINCHPOINT_LAB_MYSQL_{self.port}"

    @property
    def address_env(self) -> str:
        return self.dsn_env

    @property
    def dsn(self) -> str:
        return f"mysql://root@{HOST}:{self.port}/{DATABASE}"

    @property
    def slow_log(self) -> Path:
        assert self.folder is not None
        return self.folder / SLOW_LOG

    def start(self) -> None:
        """Makes the data folder, starts the server, waits until it takes connections."""
        binaries = find_mariadb()
        if binaries is None:
            raise StackError("MariaDB is not installed: apt-get install mariadb-server")
        install, server = binaries
        user = _server_user()
        self.folder = Path(tempfile.mkdtemp(prefix="pinchpoint-mariadb-"))
        try:
            if user is not None:
                entry = pwd.getpwnam(user)
                os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self._install(install, user)
            self._server = Child(
                "mariadbd", self._argv(server, user), self.folder / "server.out", dict(os.environ)
            )
            self._wait_ready()
            self.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
            os.environ[self.dsn_env] = self.dsn
        except BaseException:
            self.stop()
            raise

    def _argv(self, server: Path, user: str | None) -> list[str]:
        assert self.folder is not None
        argv = [str(server), "--no-defaults", f"--datadir={self.folder / 'data'}"]
        argv += [f"--port={self.port}", f"--bind-address={HOST}"]
        argv += [f"--socket={self.folder / 'mysqld.sock'}", f"--pid-file={self.folder / 'pid'}"]
        argv += [f"--log-error={self.folder / 'error.log'}", "--skip-log-bin"]
        argv += ["--performance-schema=ON"]
        argv += ["--performance-schema-consumer-events-statements-current=ON"]
        argv += ["--slow-query-log=ON", f"--slow-query-log-file={self.folder / SLOW_LOG}"]
        argv += ["--long-query-time=0"]
        # A throwaway server: small, and no disk flush per commit.
        argv += ["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M"]
        argv += ["--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0"]
        return [*argv, f"--user={user}"] if user is not None else argv

    def component(self, name: str = "mariadb") -> dict[str, Any]:
        """The server as a plan component, sampled from inside."""
        return {
            "name": name,
            "role": "database",
            "calls": [],
            "process": {"pids": [self.pid]},
            "database": {"dsn_env": self.dsn_env, "kind": "mysql"},
        }

    def connect(self, database: str | None = DATABASE) -> Any:
        """A new autocommit connection as root (PyMySQL)."""
        import pymysql

        return pymysql.connect(
            host=HOST, port=self.port, user="root", database=database, autocommit=True,
            connect_timeout=10,
        )  # fmt: skip

    def execute(self, sql: str) -> None:
        """Runs one statement as root, e.g. to create a test's tables."""
        conn = self.connect(database=None)
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql)
        finally:
            conn.close()

    def _install(self, install: Path, user: str | None) -> None:
        assert self.folder is not None
        argv = [str(install), "--no-defaults", f"--datadir={self.folder / 'data'}"]
        argv += ["--auth-root-authentication-method=normal", "--skip-test-db"]
        argv += [f"--user={user}"] if user is not None else []
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, cwd=self.folder, check=False
        )
        if done.returncode != 0:
            raise StackError(f"mariadb-install-db failed:\n{done.stderr or done.stdout}")

    def _wait_ready(self) -> None:
        self._wait_answering(self._answers, "error.log")

    def _answers(self) -> bool:
        import pymysql

        try:
            self.connect(database=None).close()
        except pymysql.Error:
            return False
        return True
