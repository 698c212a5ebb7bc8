"""Real PHP-FPM, Tomcat and Express servers behind a real nginx on 127.0.0.1, for the tests
of what init reads of them; each stopped when its block ends."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from discover_helpers import HOST, listens, running

from pinchpoint.demo.nginx import NginxNotFound, find_nginx
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint_lab.ports import end, free_port

try:
    NGINX: Path | None = find_nginx()
except NginxNotFound:
    NGINX = None
FPM = next(iter(sorted(glob.glob("/usr/sbin/php-fpm*"))), "")
TOMCAT_HOME = Path("/usr/share/tomcat10")
JAVA = shutil.which("java") or ""
NODE = shutil.which("node") or ""
EXPRESS = Path(__file__).parent.parent / "collect" / "express"
# pinchpoint's suggested PHP-FPM format, as written inside the quotes of a pool file.
FPM_FORMAT = '%R - %u %t \\"%m %r%Q%q\\" %s %{mili}d'
# ?ms=N waits N ms (2 s at most).
PHP_SCRIPT = """<?php
usleep(min((int)($_GET['ms'] ?? 0), 2000) * 1000);
echo "ok\\n";
"""
JSP = '<%@ page session="false" %>ok\n'


def _wait(check: object, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not callable(check) or not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {seconds} s")
        time.sleep(0.05)


@contextlib.contextmanager
def nginx_front(root: Path, location: str) -> Iterator[int]:
    """nginx on a free port of 127.0.0.1 running `location` for every path, logging with
    pinchpoint's format; its port."""
    assert NGINX is not None
    (root / "temp").mkdir(parents=True, exist_ok=True)
    temp = "\n".join(
        f"  {kind}_temp_path {root}/temp/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    port = free_port()
    (root / "nginx.conf").write_text(
        f"{'user root;' if os.geteuid() == 0 else ''}\n"
        f"pid {root}/nginx.pid;\nerror_log {root}/error.log;\ndaemon off;\n"
        f"events {{ worker_connections 64; }}\nhttp {{\n{temp}\n"
        f"  log_format pinchpoint '{NGINX_FORMAT}';\n"
        f"  server {{ listen {HOST}:{port}; access_log {root}/access.log pinchpoint;\n"
        f"    location / {{ {location} }} }}\n}}\n"
    )
    argv = [str(NGINX), "-c", str(root / "nginx.conf"), "-p", str(root)]
    with running(argv, root, port, workers=1, output=root / "nginx.out"):
        yield port


def fastcgi_to(root: Path, upstream: str) -> str:
    """nginx's location passing every request to PHP-FPM at `upstream` for root's app.php."""
    return (
        "include /etc/nginx/fastcgi_params; "
        f"fastcgi_param SCRIPT_FILENAME {root / 'app.php'}; fastcgi_pass {upstream};"
    )


@contextlib.contextmanager
def php_fpm(root: Path, listen: str, pool: str, other: bool = True) -> Iterator[int]:
    """PHP-FPM serving root's app.php, its pool [app] listening at `listen` with the
    settings `pool` (lines of its pool file), and a second pool [other] beside it when
    `other`; its master's pid."""
    (root / "app.php").write_text(PHP_SCRIPT)
    (root / "pool.d").mkdir()
    (root / "php-fpm.conf").write_text(
        f"[global]\npid = {root / 'fpm.pid'}\nerror_log = {root / 'fpm-error.log'}\n"
        f"daemonize = no\ninclude = {root / 'pool.d'}/*.conf\n"
    )
    (root / "pool.d" / "app.conf").write_text(f"[app]\nlisten = {listen}\n{pool}")
    (root / "pool.d" / "other.conf").write_text(
        f"[other]\nlisten = {root / 'other.sock'}\npm = ondemand\npm.max_children = 4\n"
        if other
        else ""
    )
    # As root, PHP-FPM's workers run as root only when told they may (-R).
    root_flag = ["-R"] if os.geteuid() == 0 else []
    master = subprocess.Popen(
        [FPM, "-y", str(root / "php-fpm.conf"), "-F", *root_flag],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        _wait(lambda: (root / "fpm.pid").exists() and _listening(listen),
              f"PHP-FPM started (see {root / 'fpm-error.log'})", 10)  # fmt: skip
        yield master.pid
    finally:
        end(master)


def _listening(listen: str) -> bool:
    """Whether a `listen` of a pool file (a socket's path or HOST:PORT) takes connections."""
    if listen.startswith("/"):
        return Path(listen).exists()
    return listens(int(listen.rpartition(":")[2]))


def _server_xml(port: int, threads: int, pattern: str | None) -> str:
    valve = (
        ""
        if pattern is None
        else '<Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs" '
        f'prefix="access" suffix=".log" rotatable="false" buffered="false" '
        f'pattern="{pattern}"/>'
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1">
  <Service name="Catalina">
    <Connector address="127.0.0.1" port="${{http.port}}" protocol="HTTP/1.1"
               maxThreads="{threads}" acceptCount="20"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        {valve}
      </Host>
    </Engine>
  </Service>
</Server>
"""


@contextlib.contextmanager
def tomcat(root: Path, threads: int, pattern: str | None) -> Iterator[tuple[int, int]]:
    """Tomcat 10 with one HTTP Connector of `threads` threads, its port given as
    -Dhttp.port, and an AccessLogValve of `pattern` (none when None); its port and pid."""
    for folder in ("conf", "logs", "temp", "work", "webapps/ROOT"):
        (root / folder).mkdir(parents=True)
    port = free_port()
    (root / "conf" / "server.xml").write_text(_server_xml(port, threads, pattern))
    shutil.copy(TOMCAT_HOME / "etc" / "web.xml", root / "conf" / "web.xml")  # its DefaultServlet
    (root / "webapps" / "ROOT" / "page").write_text("ok\n")
    classpath = f"{TOMCAT_HOME / 'bin' / 'bootstrap.jar'}:{TOMCAT_HOME / 'bin' / 'tomcat-juli.jar'}"
    argv = [
        JAVA, "-Xshare:auto", "-XX:TieredStopAtLevel=1", f"-Dhttp.port={port}",
        f"-Dcatalina.home={TOMCAT_HOME}", f"-Dcatalina.base={root}",
        f"-Djava.io.tmpdir={root / 'temp'}", "-cp", classpath,
        "org.apache.catalina.startup.Bootstrap", "start",
    ]  # fmt: skip
    pid_file = root / "tomcat.pid"
    # As catalina.sh does with CATALINA_PID: the file its JVM's pid is written to.
    process = subprocess.Popen(
        argv, stdout=(root / "logs" / "console.log").open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "CATALINA_PID": str(pid_file)}, start_new_session=True,
    )  # fmt: skip
    pid_file.write_text(f"{process.pid}\n")
    try:
        _wait(lambda: process.poll() is not None or listens(port), "Tomcat listened", 30)
        assert process.poll() is None, (root / "logs" / "console.log").read_text()[-2000:]
        yield port, process.pid
    finally:
        end(process)


@contextlib.contextmanager
def express(root: Path, fmt: str, workers: int = 0) -> Iterator[tuple[int, int]]:
    """The Express app of tests/collect/express logging in morgan format `fmt` to root's
    morgan.log (a file init cannot know of), as one process or a cluster of `workers`; its
    port and first pid."""
    port = free_port()
    argv = [NODE, str(EXPRESS / "app.js"), str(port), str(root / "morgan.log"), fmt]
    with running([*argv, str(workers)], root, port, workers=workers) as pid:
        yield port, pid
