"""A component's `[component.redis]` table: sample the Redis server from inside during the
run (collect/redis/): INFO (its CPU, clients, memory), INFO commandstats and SLOWLOG.

```toml
[[component]]
name = "redis"
role = "cache"

[component.redis]
url_env = "REDIS_URL"   # the environment variable holding redis://[user:password@]host:port
rate = 2                # samples per second of INFO and INFO commandstats
```

The plan holds no secret: only the name of the variable that holds the URL (its password
among it). A URL that is not set, or a server that cannot be reached, is a collection
warning; the run goes on without the samples.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from pydantic import Field, model_validator

from pinchpoint.plan.toml import FieldError, Strict

MAX_RATE_HZ = 20
DEFAULT_PORT = 6379


class RedisAddress:
    """Where a Redis server listens and who the sampler logs in as."""

    def __init__(self, host: str, port: int, username: str | None, password: str | None) -> None:
        self.host = host
        self.port = port
        self.username = username
        self.password = password


def parse_url(url: str) -> RedisAddress:
    """The address of a `redis://[[user]:password@]host[:port][/db]` URL; ValueError saying
    what is wrong with it (never quoting it: it may hold the password)."""
    parts = urlsplit(url)
    if parts.scheme != "redis":
        raise ValueError("the URL must start with redis:// (rediss://, TLS, is not supported)")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError("the URL's port is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise ValueError("the URL names no host")
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return RedisAddress(parts.hostname, port, username, password)


class Redis(Strict):
    # The environment variable holding the server's redis:// URL.
    url_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=200)
    rate: int = Field(default=2, ge=1, le=MAX_RATE_HZ)

    @model_validator(mode="before")
    @classmethod
    def _no_url(cls, data: object) -> object:
        if isinstance(data, dict) and "url" in data:
            raise FieldError(
                "url",
                "the plan holds no secret: name the environment variable that holds the "
                "redis:// URL with url_env",
            )
        return data

    def url(self) -> str | None:
        """The URL from the environment; None when the variable is not set."""
        value = os.environ.get(self.url_env, "").strip()
        return value or None
