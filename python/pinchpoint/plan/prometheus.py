"""The plan's `[[prometheus]]` tables: resource series read after the run from a Prometheus
server the user already runs (node_exporter, cAdvisor), besides or instead of the sampler.

```toml
[[prometheus]]
url = "http://prometheus.internal:9090"
token_env = "PROMETHEUS_TOKEN"     # bearer token; or username_env + password_env (basic)
step = "1s"                        # query resolution; default: [sampling] interval

[prometheus.series.host]           # the rows named `host` (`host@<agent>`: an agent's)
preset = "node_exporter"
selector = 'instance="10.0.0.5:9100"'
mode = "replace"                   # or "merge" (default): fill what the sampler left null

[prometheus.series.gunicorn]       # a component of the plan
preset = "cadvisor"
container = "gunicorn"             # or name = "gunicorn" (Docker's cAdvisor)
columns.lock_waits = 'sum(pg_locks_count{mode="exclusivelock"})'   # raw PromQL
```

The queries themselves are in `promql.py`. Importing this module loads pydantic only: the
plan imports it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

# One label matcher, `label op "value"`, and a comma-separated list of them.
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_MATCHERS = re.compile(rf"^(?:{_MATCHER}(?:,{_MATCHER})*,?)?$")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
HOST = "host"
# Columns of resources.parquet a series cannot set: they identify the row.
_KEYS = ("ts", "component")


def _duration(value: object) -> float:
    from pinchpoint.plan.toml import parse_duration

    return parse_duration(value)


Duration = Annotated[float, BeforeValidator(_duration)]


def _field_error(loc: str | tuple, message: str) -> ValueError:
    from pinchpoint.plan.toml import FieldError

    return FieldError(loc, message)


class Series(BaseModel):
    """Which of a Prometheus server's series make the rows of one host or component."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    preset: Literal["node_exporter", "cadvisor"] | None = None
    # Label matchers added to every preset query: 'instance="db1:9100", job="node"'.
    selector: str = ""
    # cAdvisor: the container, by its `container` label (Kubernetes) or `name` (Docker).
    container: str | None = None
    name: str | None = None
    # Column of resources.parquet -> PromQL giving one number per time (series are summed);
    # `$window` is the rate window, `$step` the step in seconds. Overrides the preset's.
    columns: dict[str, str] = Field(default_factory=dict)
    # merge: the sampler's values stay, these fill what it left null (or make the rows of
    # what it does not sample); replace: these rows instead of the sampler's.
    mode: Literal["merge", "replace"] = "merge"

    @field_validator("selector")
    @classmethod
    def _check_selector(cls, selector: str) -> str:
        if not _MATCHERS.match(selector):
            raise ValueError(
                f"{selector!r} is not a list of label matchers such as "
                '\'instance="db1:9100", job="node"\''
            )
        return selector.strip().rstrip(",")

    @field_validator("columns")
    @classmethod
    def _check_columns(cls, columns: dict[str, str]) -> dict[str, str]:
        import pyarrow as pa

        from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

        # A query gives numbers: a text column (net_link) cannot be filled from one.
        allowed = [
            n
            for n in RESOURCES_SCHEMA.names
            if n not in _KEYS and RESOURCES_SCHEMA.field(n).type != pa.string()
        ]
        for column, query in columns.items():
            if column not in allowed:
                raise _field_error(
                    column,
                    f"{column!r} is not a column of resources.parquet: one of {', '.join(allowed)}",
                )
            if not query.strip():
                raise _field_error(column, "an empty query")
        return columns

    @model_validator(mode="after")
    def _check_preset(self) -> Series:
        for label in ("container", "name"):
            if getattr(self, label) is not None and self.preset != "cadvisor":
                raise _field_error(
                    label, f'{label} selects a container: it needs preset = "cadvisor"'
                )
        if self.preset == "cadvisor" and not (self.container or self.name or self.selector):
            raise _field_error(
                "container",
                'preset "cadvisor" needs the container: container = "...", name = "..." '
                "(Docker) or a selector",
            )
        if self.container is not None and self.name is not None:
            raise _field_error("name", "set container or name, not both")
        if self.preset is None and not self.columns:
            raise _field_error(
                "preset", 'set preset = "node_exporter" or "cadvisor", or columns with PromQL'
            )
        return self


class Prometheus(BaseModel):
    """A Prometheus server, how to reach it, and the rows each series of it makes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    # Names of environment variables holding the credentials, never the secrets themselves.
    token_env: str | None = None
    username_env: str | None = None
    password_env: str | None = None
    # CA bundle (or the server's own certificate) to verify an https URL with.
    ca_file: str | None = None
    # Query resolution (default: the sampling interval) and the range of rate() (default:
    # the larger of step + scrape interval and 4 scrape intervals, as Grafana's).
    step: Duration | None = Field(default=None, ge=0.1, le=3600)
    rate_window: Duration | None = Field(default=None, gt=0)
    timeout: Duration = Field(default=10.0, gt=0)
    series: dict[str, Series] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, env in (("token", "token_env"), ("username", "username_env")):
                if key in data or (key == "username" and "password" in data):
                    raise _field_error(
                        key if key in data else "password",
                        f"the plan holds no secret: name the environment variable that holds "
                        f"it with {env}" + (" and password_env" if key == "username" else ""),
                    )
        return data

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} must be http(s)://host:port[/path]")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _check_auth(self) -> Prometheus:
        if (self.username_env is None) != (self.password_env is None):
            field = "password_env" if self.password_env is None else "username_env"
            raise _field_error(field, "basic auth needs both username_env and password_env")
        if self.token_env is not None and self.username_env is not None:
            raise _field_error("token_env", "set token_env or username_env/password_env, not both")
        return self


def check_series_names(servers: Sequence[Prometheus], components: Sequence[str]) -> None:
    """Each series names `host`, `host@<name>` or a component, once over all servers."""
    seen: dict[str, int] = {}
    for index, server in enumerate(servers):
        for key in server.series:
            loc = ("prometheus", index, "series", key)
            remote = key.startswith(f"{HOST}@") and _NAME.match(key[len(HOST) + 1 :])
            if key != HOST and not remote and key not in components:
                raise _field_error(
                    loc,
                    f"{key!r} is not host, host@<name> or a component of the plan "
                    f"({', '.join(components) or 'none'})",
                )
            if key in seen:
                raise _field_error(loc, f"{key!r} already has series from prometheus {seen[key]}")
            seen[key] = index
