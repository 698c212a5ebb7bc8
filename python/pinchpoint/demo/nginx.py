"""Finding nginx and writing the demo's nginx config."""

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinchpoint.demo.errors import NginxNotFound
from pinchpoint.demo.procs import check_config as run_check
from pinchpoint.logformats.nginx import NGINX_FORMAT

_FALLBACK_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
HOST = "127.0.0.1"
# What nginx's own uwsgi_params file passes, written out: the file's place differs by system.
_UWSGI_PARAMS = (
    ("QUERY_STRING", "$query_string"),
    ("REQUEST_METHOD", "$request_method"),
    ("CONTENT_TYPE", "$content_type"),
    ("CONTENT_LENGTH", "$content_length"),
    ("REQUEST_URI", "$request_uri"),
    ("PATH_INFO", "$document_uri"),
    ("DOCUMENT_ROOT", "$document_root"),
    ("SERVER_PROTOCOL", "$server_protocol"),
    ("REQUEST_SCHEME", "$scheme"),
    ("HTTPS", "$https if_not_empty"),
    ("REMOTE_ADDR", "$remote_addr"),
    ("REMOTE_PORT", "$remote_port"),
    ("SERVER_PORT", "$server_port"),
    ("SERVER_NAME", "$server_name"),
)
# Long enough for any /sys_perf_check a plan can ask for; the load engine has its own timeouts.
PROXY_READ_TIMEOUT_S = 300


def find_nginx() -> Path:
    """The nginx binary from PATH or the usual sbin folders; raises NginxNotFound if absent."""
    found = shutil.which("nginx")
    if found is None:
        found = shutil.which("nginx", path=os.pathsep.join(_FALLBACK_DIRS))
    if found is None:
        raise NginxNotFound(
            "nginx is not installed (looked in PATH and /usr/sbin). Install it with "
            "`sudo apt-get install nginx-light` (or `nginx` on other distributions), "
            "or run `make demo`, which installs it when run as root."
        )
    return Path(found)


@dataclass(frozen=True)
class NginxPaths:
    """Where a demo nginx keeps its files, all inside the stack's workdir, their names
    starting with prefix (two nginx in one workdir have two prefixes)."""

    workdir: Path
    prefix: str = "nginx"

    @property
    def conf(self) -> Path:
        return self.workdir / f"{self.prefix}.conf"

    @property
    def pid_file(self) -> Path:
        return self.workdir / f"{self.prefix}.pid"

    @property
    def access_log(self) -> Path:
        return self.workdir / f"{self.prefix}-access.log"

    @property
    def error_log(self) -> Path:
        return self.workdir / f"{self.prefix}-error.log"

    @property
    def temp_dir(self) -> Path:
        return self.workdir / f"{self.prefix}-temp"


@dataclass(frozen=True)
class ProxyOptions:
    """How the demo proxy passes requests on, and whether it limits them.

    protocol: "http" (proxy_pass, to gunicorn) or "uwsgi" (uwsgi_pass, to uWSGI's own
    protocol; nginx only). limit_conn: how many requests nginx lets through at once
    (limit_conn); it answers the others 503 at once, without calling the upstream (nginx
    only). maxconn: how many requests HAProxy sends the server at once (the server's
    `maxconn`); the others wait in HAProxy's queue, logged as Tw (HAProxy only).
    workers: nginx's worker processes, or "auto" for one per core (nginx only; one worker
    uses at most one core).
    """

    protocol: str = "http"
    limit_conn: int | None = None
    maxconn: int | None = None
    # Where the upstream listens: another address for one in a network namespace.
    upstream_host: str = HOST
    workers: int | Literal["auto"] = 1

    def __post_init__(self) -> None:
        if self.protocol not in ("http", "uwsgi"):
            raise ValueError(f"protocol must be http or uwsgi, got {self.protocol!r}")
        if self.limit_conn is not None and self.limit_conn < 1:
            raise ValueError(f"limit_conn must be at least 1, got {self.limit_conn}")
        if self.maxconn is not None and self.maxconn < 1:
            raise ValueError(f"maxconn must be at least 1, got {self.maxconn}")


def _pass_lines(options: ProxyOptions, upstream_port: int, keepalive: bool) -> str:
    if options.protocol == "uwsgi":
        params = "\n".join(
            f"            uwsgi_param {name} {value};" for name, value in _UWSGI_PARAMS
        )
        return f"""\
            uwsgi_pass {options.upstream_host}:{upstream_port};
{params}
            uwsgi_connect_timeout 10s;
            uwsgi_send_timeout {PROXY_READ_TIMEOUT_S}s;
            uwsgi_read_timeout {PROXY_READ_TIMEOUT_S}s;"""
    if keepalive:
        # Kept-alive connections to the next nginx: at thousands of requests a second a new
        # connection each would run loopback out of ephemeral ports (TIME_WAIT).
        target = "http://pinchpoint_upstream;\n            proxy_http_version 1.1;\n"
        target += '            proxy_set_header Connection "";'
    else:
        target = f"http://{options.upstream_host}:{upstream_port};"
    return f"""\
            proxy_pass {target}
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Pinchpoint $http_x_pinchpoint;
            proxy_connect_timeout 10s;
            proxy_send_timeout {PROXY_READ_TIMEOUT_S}s;
            proxy_read_timeout {PROXY_READ_TIMEOUT_S}s;"""


def _ws_location(options: ProxyOptions, upstream_port: int) -> str:
    """`/ws/` passed on as WebSocket upgrades: HTTP/1.1 with the client's Upgrade."""
    return f"""\
        location /ws/ {{
            proxy_pass http://{options.upstream_host}:{upstream_port};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_set_header Host $http_host;
            proxy_set_header X-Pinchpoint $http_x_pinchpoint;
            proxy_read_timeout {PROXY_READ_TIMEOUT_S}s;
        }}

"""


def _limit_lines(options: ProxyOptions) -> tuple[str, str]:
    """The http-level and location-level lines of the connection limit."""
    if options.limit_conn is None:
        return "", ""
    # Every request of the load comes from 127.0.0.1: one key, so one limit for them all.
    zone = "    limit_conn_zone $binary_remote_addr zone=pinchpoint_conn:1m;\n"
    location = (
        f"            limit_conn pinchpoint_conn {options.limit_conn};\n"
        "            limit_conn_status 503;\n"
        "            limit_conn_log_level warn;\n"
    )
    return zone, location


def render_config(
    paths: NginxPaths,
    port: int,
    upstream_port: int,
    run_as_root: bool,
    options: ProxyOptions | None = None,
    *,
    static: bool = True,
    keepalive: bool = False,
) -> str:
    """The nginx.conf text: its workers in the foreground, passing 127.0.0.1:port upstream.

    With static, nginx answers `/static` itself (200 "ok"), without the upstream. With
    keepalive (for an upstream that is another nginx), it keeps connections to it open.
    """
    options = options or ProxyOptions()
    if options.maxconn is not None:
        raise ValueError("maxconn is HAProxy's; nginx limits requests with limit_conn")
    zone, limit = _limit_lines(options)
    if keepalive:
        zone += (
            f"    upstream pinchpoint_upstream {{\n        server {HOST}:{upstream_port};\n"
            "        keepalive 64;\n    }\n"
        )
    static_location = (
        "        location /static {\n            default_type text/plain;\n"
        '            return 200 "ok\\n";\n        }\n\n'
        if static
        else ""
    )
    ws_location = _ws_location(options, upstream_port) if options.protocol == "http" else ""
    temp = paths.temp_dir
    temp_paths = "\n".join(
        f"    {kind}_temp_path {temp / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # Without `user`, a root master runs its worker as nobody, which cannot write the workdir.
    user = "user root;\n" if run_as_root else ""
    return f"""\
# Written by pinchpoint's demo stack.
daemon off;
{user}worker_processes {options.workers};
worker_rlimit_nofile 16384;
pid {paths.pid_file};
error_log {paths.error_log} warn;

events {{
    worker_connections 8192;
}}

http {{
    log_format pinchpoint '{NGINX_FORMAT}';
    access_log {paths.access_log} pinchpoint;
{temp_paths}

    keepalive_timeout 75s;
    keepalive_requests 1000000;
{zone}
    server {{
        listen {HOST}:{port} backlog=4096;

{static_location}{ws_location}        location / {{
{limit}{_pass_lines(options, upstream_port, keepalive)}
        }}
    }}
}}
"""


def nginx_argv(nginx: Path, paths: NginxPaths, *, test: bool = False) -> list[str]:
    """The command line running (or, with test, checking) the demo config."""
    argv = [str(nginx), "-p", f"{paths.workdir}/", "-c", str(paths.conf)]
    if _supports_error_log_flag(nginx):
        # Otherwise messages logged before the config is read go to the compiled-in error log.
        argv += ["-e", str(paths.error_log)]
    return [*argv, "-t", "-q"] if test else argv


def check_config(nginx: Path, paths: NginxPaths, timeout_s: float = 15.0) -> None:
    """Runs `nginx -t` on the config; raises StackError with nginx's own message if it fails."""
    run_check(nginx_argv(nginx, paths, test=True), "nginx", paths.conf, timeout_s)


@functools.cache
def _supports_error_log_flag(nginx: Path) -> bool:
    result = subprocess.run(
        [str(nginx), "-h"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10
    )
    return "-e filename" in result.stderr + result.stdout


def nginx_component(
    name: str, calls: list[str], access_log: Path, pid_file: Path
) -> dict[str, object]:
    """A demo nginx as a plan's component."""
    return {
        "name": name,
        "role": "proxy",
        "calls": calls,
        "log": {"path": str(access_log), "format": "nginx", "log_format": NGINX_FORMAT},
        "process": {"pid_file": str(pid_file)},
    }
