"""A throwaway PostgreSQL cluster on 127.0.0.1 for the demo app's database endpoints.

    with PostgresCluster() as pg:
        stack = DemoStack(workdir, app_env={PG_DSN_ENV: pg.dsn})
        components = with_database(stack.components(), pg.component())

initdb makes the cluster in a new folder under the system's temp folder (PostgreSQL
runs as the `postgres` user when pinchpoint is root, and that user must reach the
folder), the server logs every statement's duration (`log_min_duration_statement=0`)
with the client's application_name in the prefix, and the folder is removed on exit.
Statements carry the run's tag in a sqlcommenter comment (see the demo app).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.procs import Child
from pinchpoint_lab.data_server import DataServer
from pinchpoint_lab.ports import HOST

LOG_PREFIX = "%m [%p] %q%u@%d %a "
LOG_FILE = "postgresql.log"
_SETTINGS = {
    "listen_addresses": HOST,
    "logging_collector": "on",
    "log_filename": LOG_FILE,
    "log_file_mode": "0644",
    "log_rotation_age": "0",
    "log_rotation_size": "0",
    "log_line_prefix": LOG_PREFIX,
    "log_min_duration_statement": "0",
    "log_timezone": "UTC",
    "lc_messages": "C",
    "log_checkpoints": "off",
    # A throwaway cluster: no durability, so a commit costs no disk flush.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # Backends show " waiting" in their process title while they wait for a lock.
    "update_process_title": "on",
}


def find_postgres() -> tuple[Path, Path] | None:
    """initdb and postgres of the newest installed PostgreSQL (Debian's layout or PATH)."""
    found = []
    for name in ("initdb", "postgres"):
        versions = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version)
        path = versions[-1] if versions else shutil.which(name)
        if path is None:
            return None
        found.append(Path(path))
    return found[0], found[1]


def _version(path: str) -> tuple[int, ...]:
    part = Path(path).parent.parent.name
    return tuple(int(p) for p in part.split(".") if p.isdigit())


def server_user() -> str | None:
    """Who runs the server: PostgreSQL refuses root; None when not root (this user)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise StackError("running as root with no postgres (or nobody) user to run PostgreSQL as")


def _as_user(argv: list[str], user: str | None) -> list[str]:
    if user is None:
        return argv
    # setpriv execs the server itself: its pid is the postmaster's, and signals reach it.
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *argv]


class PostgresCluster(DataServer):
    """initdb + postgres on 127.0.0.1 and a free port; stopped and removed on exit.

    While it runs, its DSN is in the environment variable `dsn_env`, which its plan
    component names (`[component.database]`), so a run samples it from inside. With
    `statements`, the server loads pg_stat_statements and the database has it."""

    title = "PostgreSQL"
    # Fast shutdown.
    stop_signal = signal.SIGINT

    def __init__(self, startup_timeout_s: float = 60.0, statements: bool = False) -> None:
        super().__init__(startup_timeout_s)
        self.statements = statements

    @property
    def dsn_env(self) -> str:
        return f"PINCHPOINT_LAB_PGDSN_{self.port}"

    @property
    def address_env(self) -> str:
        return self.dsn_env

    @property
    def dsn(self) -> str:
        return f"host={HOST} port={self.port} user=postgres dbname=postgres"

    @property
    def log(self) -> Path:
        assert self.folder is not None
        return self.folder / LOG_FILE

    def start(self) -> None:
        """initdb, start the server, wait until it takes connections; cleans up on failure."""
        binaries = find_postgres()
        if binaries is None:
            raise StackError("PostgreSQL is not installed: apt-get install postgresql")
        if importlib.util.find_spec("psycopg") is None:
            raise StackError("the database demo needs psycopg: pip install 'psycopg[binary]'")
        initdb, postgres = binaries
        user = server_user()
        self.folder = Path(tempfile.mkdtemp(prefix="pinchpoint-pg-"))
        try:
            if user is not None:
                entry = pwd.getpwnam(user)
                os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self._initdb(initdb, user)
            argv = [str(postgres), "-D", str(self.folder / "data"), "-p", str(self.port)]
            settings = {**_SETTINGS, "unix_socket_directories": str(self.folder)}
            settings["log_directory"] = str(self.folder)
            if self.statements:
                settings["shared_preload_libraries"] = "pg_stat_statements"
            for key, value in settings.items():
                argv += ["-c", f"{key}={value}"]
            self._server = Child(
                "postgres", _as_user(argv, user), self.folder / "server.out", dict(os.environ)
            )
            self._wait_ready()
            if self.statements:
                self.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            os.environ[self.dsn_env] = self.dsn
        except BaseException:
            self.stop()
            raise

    def component(self, name: str = "postgres") -> dict[str, Any]:
        """The cluster as a plan component: its statement log, its processes and the
        variable holding its DSN, to sample it from inside."""
        return {
            "name": name,
            "role": "database",
            "calls": [],
            "log": {"path": str(self.log), "format": "postgresql", "log_format": LOG_PREFIX},
            "process": {"pids": [self.pid]},
            "database": {"dsn_env": self.dsn_env},
        }

    def execute(self, sql: str) -> None:
        """Runs statements as the superuser (psycopg), e.g. to create the demo's tables."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.encode())

    def _initdb(self, initdb: Path, user: str | None) -> None:
        assert self.folder is not None
        argv = [str(initdb), "-D", str(self.folder / "data"), "-U", "postgres"]
        argv += ["--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C"]
        done = subprocess.run(
            _as_user(argv, user),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.folder,
            check=False,
        )
        if done.returncode != 0:
            raise StackError(f"initdb failed:\n{done.stderr or done.stdout}")

    def _wait_ready(self) -> None:
        self._wait_answering(lambda: _answers(self.dsn), "server.out")


def with_database(components: list[dict[str, Any]], database: dict[str, Any]) -> list[dict]:
    """The stack's components with the database added, called by the app."""
    out = [
        {**c, "calls": [*c["calls"], database["name"]]} if c["name"] == "app" else c
        for c in components
    ]
    return [*out, database]


def _answers(dsn: str) -> bool:
    """Whether the server runs statements (it refuses them while it starts up)."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False
