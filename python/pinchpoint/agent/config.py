"""The agent's config file: where it listens, its token, and the components it watches.

[agent]
bind = "10.0.0.5"
port = 7070
token_file = "/etc/pinchpoint/agent.token"   # or token = "..."
tls_cert = "/etc/pinchpoint/agent.crt"       # optional, with tls_key
tls_key = "/etc/pinchpoint/agent.key"
max_connections = 4096                        # optional
discover = ["/etc/nginx", "/run/nginx.pid"]   # optional: `pinchpoint init --agent` may read
                                              # servers' config and pid files under these

[[component]]                                 # as in a plan
name = "nginx"
[component.log]
path = "/var/log/nginx/access.log*"
format = "nginx"
[component.process]
pid_file = "/run/nginx.pid"
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pinchpoint.collect.resources.sampler import GENERATOR, HOST
from pinchpoint.collect.sources.protocol import AGENT_SELF
from pinchpoint.plan.model import Component, Duration, parse_toml
from pinchpoint.plan.toml import read_text_file
from pinchpoint.plan.user_paths import NotUsable, read_input

DEFAULT_PORT = 7070
MIN_TOKEN_CHARS = 16
# The most a config file or a token file may hold: larger is not one.
MAX_CONFIG_BYTES = 1 << 20
MAX_TOKEN_BYTES = 4096
RESERVED = frozenset({HOST, GENERATOR, AGENT_SELF})


class ConfigError(ValueError):
    """An agent config that cannot serve, with where the problem is."""


class Listen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bind: str = "127.0.0.1"
    port: int = Field(default=DEFAULT_PORT, ge=0, le=65535)  # 0: any free port
    token: str | None = None
    token_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    # Runs kept (running or finished); the oldest finished one makes room for a new one.
    max_runs: int = Field(default=8, ge=1, le=1000)
    # A run not stopped by then stops sampling by itself.
    max_run: Duration = Field(default=6 * 3600.0, gt=0)
    # Connections held open at once (idle, arriving or answered); a new one over the cap
    # closes the one idle the longest. Lowered to what the open-files limit allows.
    max_connections: int = Field(default=4096, ge=16, le=1_000_000)
    # The folders (or files) discovery may read servers' configs and pid files under; None:
    # discovery is off. Sockets and command lines need no file.
    discover: list[str] | None = Field(default=None, max_length=256)

    @model_validator(mode="after")
    def _check(self) -> Listen:
        if self.token is not None and self.token_file is not None:
            raise ValueError("set token or token_file, not both")
        if self.token is not None and len(self.token.strip()) < MIN_TOKEN_CHARS:
            raise ValueError(f"the token must have at least {MIN_TOKEN_CHARS} characters")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("set both tls_cert and tls_key, or neither")
        relative = [p for p in self.discover or () if not p.startswith("/")]
        if relative:
            raise ValueError(f"discover takes absolute paths, not {relative[0]!r}")
        return self


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: Listen = Listen()
    component: list[Component] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check_components(self) -> AgentConfig:
        if not self.component and self.agent.discover is None:
            raise ValueError(
                "list at least one [[component]] to watch (or set [agent] discover to let "
                "`pinchpoint init` find them)"
            )
        names = [c.name for c in self.component]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"component names must be unique: {dupes}")
        for c in self.component:
            if c.name in RESERVED:
                raise ValueError(f"component name {c.name!r} is reserved")
            if c.host is not None:
                raise ValueError(f"component {c.name!r}: `host` belongs in the plan, not here")
        return self

    def find(self, name: str) -> Component | None:
        """The component of that name, looked up in the config (never a path)."""
        return next((c for c in self.component if c.name == name), None)


def load_config(path: Path) -> AgentConfig:
    """The config in `path`; ConfigError naming the file (and line) when it cannot be
    read, is larger than a config, is not UTF-8 or does not validate."""
    text = read_text_file(Path(path), MAX_CONFIG_BYTES, "config", ConfigError)
    return parse_config(text, str(path))


def parse_config(text: str, source: str = "<agent config>") -> AgentConfig:
    return parse_toml(AgentConfig, text, source, ConfigError)


def read_token(listen: Listen) -> str | None:
    """The bearer token from the config or its token file; None when neither is set."""
    if listen.token_file is None:
        return listen.token.strip() if listen.token is not None else None
    try:
        data = read_input(Path(listen.token_file), MAX_TOKEN_BYTES, "token")
    except NotUsable as e:
        raise ConfigError(f"token_file {e}") from None
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"token_file {listen.token_file}: not UTF-8 text (byte {data[e.start]:#04x} "
            f"at offset {e.start})"
        ) from None
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"token_file {listen.token_file}: the token must have at least "
            f"{MIN_TOKEN_CHARS} characters"
        )
    return token


def is_loopback(bind: str) -> bool:
    """Whether every address `bind` names is a loopback address."""
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(bind, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
