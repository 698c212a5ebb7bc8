"""What discovery learns of one tier of the stack, each fact with where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Address:
    """Where a tier sends requests on: a TCP host and port, or a unix socket's path."""

    host: str | None = None
    port: int | None = None
    unix: Path | None = None

    def __str__(self) -> str:
        return f"unix:{self.unix}" if self.unix is not None else f"{self.host}:{self.port}"


@dataclass
class Tier:
    """One tier as its own config says it: its name and role in the plan, its processes, its
    access log and format, where it sends requests on, and notes and warnings for the plan.

    `log_format` is the plan's format name (nginx, haproxy, gunicorn, uwsgi, postgresql);
    `log_format_string` the server's own format string when it is not the default one.
    Each note says where a fact came from ("access_log from /etc/nginx/sites-enabled/app,
    line 12"); each warning is what is missing, with the line to add where there is one.
    """

    name: str
    role: str
    pid: int
    pid_file: Path | None = None
    # A process name that selects its processes and no others' (where it has no pid file).
    process_name: str | None = None
    log_path: Path | None = None
    log_format: str | None = None
    log_format_string: str | None = None
    next_hops: list[Address] = field(default_factory=list)
    # Requests it serves at once, where it is a pool of workers (app servers).
    slots: int | None = None
    # Requests it lets through at once to the next tier (a proxy's server maxconn).
    limit: int | None = None
    # The agent whose host runs it; None: this host.
    host: str | None = None
    # A tier that runs inside its processes (the app inside its app server), with its own log.
    inside: list[Tier] = field(default_factory=list)
    # A database's connection string as its clients connect (no password): for the plan's
    # [component.database], whose variable the user sets to it.
    client_dsn: str | None = None
    # The OTEL_* variables its processes export spans by (discover/otel.py: a few, never
    # headers or other variables).
    otel: dict[str, str] = field(default_factory=dict)
    # A store sampled from inside: "mysql" ([component.database] kind = "mysql") or "redis"
    # ([component.redis]); client_dsn is then the URL to set, a placeholder for its password.
    sampled_as: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
