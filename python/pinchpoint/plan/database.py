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
`[[agent]] token_env` does. A DSN that is not set, or a server that cannot be reached,
is a collection warning; the run goes on without the samples.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, model_validator

from pinchpoint.plan.toml import FieldError, Strict

MAX_RATE_HZ = 20


class Database(Strict):
    # The environment variable holding the DSN: for PostgreSQL libpq's `key=value` or a
    # `postgresql://` URI, for MySQL a `mysql://user:password@host:port/database` URL.
    dsn_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
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

    def dsn(self) -> str | None:
        """The connection string from the environment; None when the variable is not set."""
        value = os.environ.get(self.dsn_env, "").strip()
        return value or None
