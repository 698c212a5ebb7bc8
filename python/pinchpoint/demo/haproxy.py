"""HAProxy in front of the demo's application server: its config, command line, component.

HAProxy runs in the foreground (`-db`), one thread, `mode http` with `option httplog`.
It logs to its stdout (`log stdout format raw`), which the stack sends to
`haproxy.log`: one line a request, as the `haproxy` log format reads them, the tag in
the request line and in the captured X-Pinchpoint header, with the timers
TR/Tw/Tc/Tr/Ta. (`-q` would silence those lines too, so its rare startup warnings land
in that file as well, before any run's lines.) HAProxy in the foreground writes no pid
file: the stack writes it.

With ProxyOptions(maxconn=N), HAProxy sends the server at most N requests at once; the
others wait in the backend's queue, and their wait is Tw (`queue_s` in tiers.parquet).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.nginx import PROXY_READ_TIMEOUT_S, ProxyOptions
from pinchpoint.demo.procs import check_config as run_check

HOST = "127.0.0.1"
_FALLBACK_DIRS = "/usr/sbin:/usr/local/sbin"


def find_haproxy() -> Path:
    """The haproxy binary from PATH or the usual sbin folders; raises StackError if absent."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path=_FALLBACK_DIRS)
    if found is None:
        raise StackError("HAProxy is not installed: `sudo apt-get install haproxy`")
    return Path(found)


@dataclass(frozen=True)
class HaproxyPaths:
    """Where the demo HAProxy keeps its files, inside the stack's workdir."""

    workdir: Path

    @property
    def conf(self) -> Path:
        return self.workdir / "haproxy.cfg"

    @property
    def pid_file(self) -> Path:
        return self.workdir / "haproxy.pid"

    @property
    def log(self) -> Path:
        return self.workdir / "haproxy.log"


def check_options(options: ProxyOptions) -> None:
    """Raises ValueError for what only nginx does."""
    if options.protocol != "http":
        raise ValueError("HAProxy passes requests on over HTTP only, not uwsgi")
    if options.limit_conn is not None:
        raise ValueError("limit_conn is nginx's; HAProxy limits requests with maxconn")


def render_config(port: int, upstream_port: int, options: ProxyOptions | None = None) -> str:
    """The haproxy.cfg text: 127.0.0.1:port passed to one server at 127.0.0.1:upstream_port;
    `/static` answered by HAProxy itself."""
    options = options or ProxyOptions()
    check_options(options)
    maxconn = f" maxconn {options.maxconn}" if options.maxconn is not None else ""
    return f"""\
# Written by pinchpoint's demo stack.
global
    nbthread 1
    maxconn 8192
    log stdout format raw local0 info

defaults
    mode http
    log global
    option httplog
    option dontlognull
    timeout connect 10s
    timeout client {PROXY_READ_TIMEOUT_S}s
    timeout server {PROXY_READ_TIMEOUT_S}s
    timeout queue {PROXY_READ_TIMEOUT_S}s
    timeout http-keep-alive 75s

frontend pinchpoint
    bind {HOST}:{port}
    maxconn 8192
    capture request header X-Pinchpoint len 128
    http-request return status 200 content-type text/plain string "ok" if {{ path_beg /static }}
    default_backend app

backend app
    # The server may close its side after each answer (uWSGI's plain http-socket does):
    # HAProxy then opens a new one, and keeps the client's connection alive.
    option http-server-close
    server app1 {HOST}:{upstream_port}{maxconn}
"""


def haproxy_argv(haproxy: Path, paths: HaproxyPaths, *, test: bool = False) -> list[str]:
    """The command line running (or, with test, checking) the config in the foreground."""
    argv = [str(haproxy), "-f", str(paths.conf), "-db"]
    return [*argv, "-c", "-q"] if test else argv


def check_config(haproxy: Path, paths: HaproxyPaths, timeout_s: float = 15.0) -> None:
    """Runs `haproxy -c` on the config; raises StackError with HAProxy's message if it fails."""
    run_check(haproxy_argv(haproxy, paths, test=True), "HAProxy", paths.conf, timeout_s)


def haproxy_component(name: str, calls: list[str], paths: HaproxyPaths) -> dict[str, object]:
    """A demo HAProxy as a plan's component (its log in `option httplog` format)."""
    return {
        "name": name,
        "role": "proxy",
        "calls": calls,
        "log": {"path": str(paths.log), "format": "haproxy"},
        "process": {"pid_file": str(paths.pid_file)},
    }
