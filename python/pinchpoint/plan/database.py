"""A component's `[component.database]` table: sample the PostgreSQL, MySQL or MariaDB
server from inside during the run (collect/database/), through a read-only connection.

```toml
[[component]]
name = "postgres"
role = "database"

[component.database]
dsn_env = "PGDSN"   # the environment variable holding the connection string
rate = 5            # samples per second of pg_stat_activity and pg_locks
kind = "postgresql" # or "mysql" (MySQL and MariaDB): a mysql:// URL in dsn_env
```

The plan holds no secret: only the name of the variable that holds the DSN, as
`[[agent]] token_env` does, or a `connection` string without a password (libpq reads the
password from PGPASSWORD or ~/.pgpass; `pinchpoint init` writes the one its clients use).
The variable, where it is set, wins over `connection`. A DSN that is not set, or a server that cannot be reached,
is a collection warning; the run goes on without the samples.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, model_validator

from pinchpoint.plan.toml import FieldError, Strict

MAX_RATE_HZ = 20


class Database(Strict):
    # The environment variable holding the DSN: for PostgreSQL libpq's `key=value` or a
    # `postgresql://` URI, for MySQL a `mysql://user:password@host:port/database` URL.
    dsn_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    # A connection string without a password, used where dsn_env is unset.
    connection: str | None = Field(default=None, max_length=1000)
    rate: int = Field(default=5, ge=1, le=MAX_RATE_HZ)
    # The server: PostgreSQL, or MySQL and MariaDB (collect/database/mysql_sampler.py).
    kind: Literal["postgresql", "mysql"] = "postgresql"

    @model_validator(mode="before")
    @classmethod
    def _no_dsn(cls, data: object) -> object:
        if isinstance(data, dict) and "dsn" in data:
            raise FieldError(
                "dsn",
                "the plan holds no secret: name the environment variable that holds the "
                "connection string with dsn_env",
            )
        return data

    @model_validator(mode="after")
    def _some_connection(self) -> Database:
        if self.dsn_env is None and self.connection is None:
            raise ValueError("set dsn_env (a variable holding the DSN) or connection")
        if self.connection is not None and (why := _holds_password(self.connection)):
            raise FieldError(
                "connection",
                f"the plan holds no secret: {why}; put the password in PGPASSWORD or "
                "~/.pgpass (MySQL: the DSN in the variable dsn_env names)",
            )
        return self

    def dsn(self) -> str | None:
        """The connection string: the variable's where it is set, else `connection`; None
        when neither is."""
        value = os.environ.get(self.dsn_env, "").strip() if self.dsn_env else ""
        return value or self.connection

    def source(self) -> str:
        """Where the connection string comes from, in words for a warning."""
        if self.dsn_env and os.environ.get(self.dsn_env, "").strip():
            return self.dsn_env
        return "connection" if self.connection else f"{self.dsn_env}"


_PASSWORD_KEY = re.compile(r"(?:^|\s)password\s*=", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s]*:[^/@\s]*@", re.IGNORECASE)


def _holds_password(connection: str) -> str | None:
    """Why the connection string holds a password; None when it holds none."""
    if _PASSWORD_KEY.search(connection):
        return "its `password=` is a secret"
    if _URI_PASSWORD.search(connection):
        return "its `user:password@` is a secret"
    return None
