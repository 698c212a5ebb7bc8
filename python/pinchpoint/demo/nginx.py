"""Finding nginx and writing the demo's nginx config."""

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.collect.formats.nginx import NGINX_FORMAT
from pinchpoint.demo.errors import NginxNotFound, StackError

_FALLBACK_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
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
    """Where the demo nginx keeps its files, all inside the stack's workdir."""

    workdir: Path

    @property
    def conf(self) -> Path:
        return self.workdir / "nginx.conf"

    @property
    def pid_file(self) -> Path:
        return self.workdir / "nginx.pid"

    @property
    def access_log(self) -> Path:
        return self.workdir / "nginx-access.log"

    @property
    def error_log(self) -> Path:
        return self.workdir / "nginx-error.log"

    @property
    def temp_dir(self) -> Path:
        return self.workdir / "nginx-temp"


def render_config(paths: NginxPaths, port: int, upstream_port: int, run_as_root: bool) -> str:
    """The nginx.conf text: one worker in the foreground, proxying 127.0.0.1:port to upstream."""
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
{user}worker_processes 1;
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

    server {{
        listen 127.0.0.1:{port} backlog=4096;

        location / {{
            proxy_pass http://127.0.0.1:{upstream_port};
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Pinchpoint $http_x_pinchpoint;
            proxy_connect_timeout 10s;
            proxy_send_timeout {PROXY_READ_TIMEOUT_S}s;
            proxy_read_timeout {PROXY_READ_TIMEOUT_S}s;
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
    result = subprocess.run(
        nginx_argv(nginx, paths, test=True),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        message = (result.stderr + result.stdout).strip() or f"exit status {result.returncode}"
        raise StackError(f"nginx rejected the demo config {paths.conf}:\n{message}")


@functools.cache
def _supports_error_log_flag(nginx: Path) -> bool:
    result = subprocess.run(
        [str(nginx), "-h"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10
    )
    return "-e filename" in result.stderr + result.stdout
