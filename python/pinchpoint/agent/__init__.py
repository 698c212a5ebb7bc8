"""`pinchpoint agent`: collects the logs and resource usage of components on another host.

    server = make_server(load_config(Path("agent.toml")))
    serve(server)  # until SIGTERM or Ctrl-C

The API is described in pinchpoint.agent.server; `pinchpoint run` talks to it through
pinchpoint.collect.sources.remote.
"""

from __future__ import annotations

import signal
import ssl
import sys
from collections.abc import Callable

from pinchpoint.agent.config import (
    AgentConfig,
    ConfigError,
    is_loopback,
    load_config,
    parse_config,
    read_token,
)
from pinchpoint.agent.server import AgentServer
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.logformats import FormatError

__all__ = [
    "AgentConfig",
    "AgentServer",
    "ConfigError",
    "check_config",
    "load_config",
    "make_server",
    "parse_config",
    "serve",
]


def check_config(config: AgentConfig) -> tuple[str | None, ssl.SSLContext | None]:
    """The token and TLS context of a config it can serve; raises ConfigError otherwise."""
    listen = config.agent
    token = read_token(listen)
    if token is None and not is_loopback(listen.bind):
        raise ConfigError(
            f"no token is configured: the agent listens on {listen.bind!r} only with one "
            "(set token or token_file in [agent]), or without one on a loopback address"
        )
    try:
        LocalCollector(config.component)  # compiles every log format
    except FormatError as e:
        raise ConfigError(str(e)) from None
    tls = None
    if listen.tls_cert is not None and listen.tls_key is not None:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            tls.load_cert_chain(listen.tls_cert, listen.tls_key)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"tls_cert/tls_key: {e}") from None
    return token, tls


def make_server(config: AgentConfig) -> AgentServer:
    """A bound, not yet serving agent; raises ConfigError for a config it cannot serve."""
    token, tls = check_config(config)
    listen = config.agent
    try:
        return AgentServer((listen.bind, listen.port), config, token, tls)
    except OSError as e:
        raise ConfigError(f"cannot listen on {listen.bind}:{listen.port}: {e.strerror}") from None


def serve(server: AgentServer, announce: Callable[[str], None] | None = None) -> None:
    """Serves until SIGTERM or Ctrl-C, then stops every run's sampling and closes."""
    say = announce or (lambda text: print(text, flush=True))
    names = ", ".join(c.name for c in server.config.component)
    say(f"pinchpoint agent listening on {server.url} (components: {names})")
    if not server.tls and not is_loopback(server.config.agent.bind):
        print(
            "pinchpoint agent: no TLS: the token travels in clear text; "
            "set tls_cert and tls_key on untrusted networks",
            file=sys.stderr,
        )
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
