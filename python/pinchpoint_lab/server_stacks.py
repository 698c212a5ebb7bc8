"""nginx in front of a server that is not Python's, each deployed as its docs show: PHP-FPM
with a static pool (`fastcgi_pass` to its socket), Tomcat 10 with one HTTP connector of
`maxThreads` threads and Node.js running Express in one process (`proxy_pass`). Each
server logs its requests in a format pinchpoint reads (PHP-FPM's access.format, Tomcat's
AccessLogValve, morgan); the plan's components name those logs and the servers' pid files.

    with PhpFpmStack(workdir, slots=2) as stack:
        ...  # stack.url + stack.path(cpu_ms, wait_ms, block); stack.components()

Tomcat takes a few seconds to start and compile its JSP; the stack sends its page once
before it is ready, so that the load meets a compiled page.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
import urllib.request
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.nginx import find_nginx, nginx_component
from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint_lab.ports import HOST, free_port

# pinchpoint's PHP-FPM format, with the tag's query (`%Q%q`) and the time in ms.
FPM_FORMAT = '%R - %u %t "%m %r%Q%q" %s %{mili}d'
# Tomcat's AccessLogValve pattern: the request line (its query holds the tag) and %D.
TOMCAT_PATTERN = '%h %l %u %t "%r" %s %b %D'
# morgan's format as pinchpoint's Node.js reader asks for it.
MORGAN_LINE = ':remote-addr [:date[iso]] ":method :url" :status :total-time'
TOMCAT_HOME = Path("/usr/share/tomcat10")
# Express and morgan, installed by `make system-deps-test` (npm ci) for the format tests.
NODE_MODULES = (
    Path(__file__).resolve().parents[2] / "tests" / "collect" / "express" / "node_modules"
)
# ?ms=N sleeps N ms (at most 2 s).
PHP_SCRIPT = """<?php
usleep((int)round(min((float)($_GET['ms'] ?? 0), 2000) * 1000));
echo "ok\\n";
"""
JSP = """<%@ page session="false" %><%
double ms = Math.min(Double.parseDouble(request.getParameter("ms")), 2000.0);
long us = Math.round(ms * 1000);
Thread.sleep(us / 1000, (int) (us % 1000) * 1000);
%>ok
"""
# /work?cpu=C&wait=W&block=B: computes C ms on the loop; waits W ms, awaited (a timer) or,
# with block=1, holding the loop without computing (Atomics.wait).
NODE_APP = """"use strict";
const fs = require("node:fs");
const express = require("express");
const morgan = require("morgan");
const [port, logFile, format] = process.argv.slice(2);
const cell = new Int32Array(new SharedArrayBuffer(4));
const app = express();
app.use(morgan(format, { stream: fs.createWriteStream(logFile, { flags: "a" }) }));
app.get("*", (req, res) => {
  const cpu = Math.min(Number(req.query.cpu) || 0, 2000);
  const wait = Math.min(Number(req.query.wait) || 0, 2000);
  const end = process.hrtime.bigint() + BigInt(Math.round(cpu * 1e6));
  while (process.hrtime.bigint() < end) {}
  if (req.query.block === "1") {
    Atomics.wait(cell, 0, 0, wait);
    res.send("ok\\n");
  } else {
    setTimeout(() => res.send("ok\\n"), wait);
  }
});
app.listen(Number(port), "127.0.0.1");
"""


def php_fpm_binary() -> str | None:
    return next(iter(sorted(glob.glob("/usr/sbin/php-fpm*"))), None)


def missing(server: str) -> str:
    """What the server's stack lacks here, "" when it can start."""
    if server == "php-fpm" and php_fpm_binary() is None:
        return "PHP-FPM is not installed (apt: php-fpm)"
    if server == "tomcat" and not (shutil.which("java") and TOMCAT_HOME.is_dir()):
        return "Tomcat 10 is not installed (apt: tomcat10)"
    if server == "node" and not (shutil.which("node") and (NODE_MODULES / "morgan").is_dir()):
        return "node and tests/collect/express's packages are needed (npm ci there)"
    return ""


class FrontedServer(Started):
    """nginx on a free loopback port in front of a server; all files in workdir."""

    name: ClassVar[str]
    startup_timeout_s: ClassVar[float] = 30.0

    def __init__(self, workdir: Path, slots: int = 1) -> None:
        self.workdir = Path(workdir).resolve()
        self.slots = slots
        self.port = free_port()
        self.server_port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.nginx_log = self.workdir / "nginx-access.log"
        self.nginx_pid_file = self.workdir / "nginx.pid"
        self.pid_file = self.workdir / f"{self.name}.pid"
        self._children: list[Child] = []

    @abstractmethod
    def _start_server(self) -> Child: ...

    @abstractmethod
    def _location(self) -> str:
        """nginx's directives passing every request to the server."""

    @abstractmethod
    def _listening(self) -> bool: ...

    @abstractmethod
    def server_component(self) -> dict[str, Any]:
        """The server as the plan names it: its log, its processes, its pool."""

    def path(self, cpu_ms: float, wait_ms: float, block: bool = False) -> str:
        return f"/work?cpu={cpu_ms:.2f}&wait={wait_ms:.2f}&ms={wait_ms:.2f}&block={int(block)}"

    def start(self) -> None:
        missing_here = missing(self.name)
        if missing_here:
            raise StackError(missing_here)
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            server = self._start_server()
            self._children.append(server)
            self._wait(server, self._listening, self.workdir / f"{self.name}.out")
            self._ready()
            nginx = self._start_nginx()
            self._children.append(nginx)
            self._wait(nginx, lambda: _listens(self.port), self.workdir / "nginx-error.log")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        children, self._children = self._children, []
        for child in reversed(children):
            child.stop(10.0)

    def components(self) -> list[dict[str, Any]]:
        """nginx calling the server, and the server, as a user's plan gives them."""
        nginx = nginx_component("nginx", [self.name], self.nginx_log, self.nginx_pid_file)
        return [nginx, self.server_component()]

    def _ready(self) -> None:
        """Anything the server needs before the load (Tomcat compiling its JSP)."""

    def _start_nginx(self) -> Child:
        temp = self.workdir / "nginx-temp"
        temp.mkdir(exist_ok=True)
        temps = "\n".join(
            f"  {kind}_temp_path {temp}/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        conf = self.workdir / "nginx.conf"
        conf.write_text(
            f"{'user root;' if os.geteuid() == 0 else ''}\nworker_processes 1;\n"
            f"pid {self.nginx_pid_file};\nerror_log {self.workdir / 'nginx-error.log'};\n"
            f"daemon off;\nevents {{ worker_connections 1024; }}\nhttp {{\n{temps}\n"
            f"  log_format pinchpoint '{NGINX_FORMAT}';\n"
            f"  upstream app {{ server {HOST}:{self.server_port}; keepalive 16; }}\n"
            f"  server {{ listen {HOST}:{self.port}; access_log {self.nginx_log} pinchpoint;\n"
            f"    location / {{ {self._location()} }} }}\n}}\n"
        )
        argv = [str(find_nginx()), "-c", str(conf), "-p", str(self.workdir)]
        return Child("nginx", argv, self.workdir / "nginx.out", dict(os.environ))

    def _wait(self, child: Child, ready: Any, log: Path) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if child.exited():
                raise StackError(f"{child.name} exited at its start: {_tail(log)}")
            if ready():
                return
            time.sleep(0.05)
        raise StackError(
            f"{child.name} did not start in {self.startup_timeout_s:g} s: {_tail(log)}"
        )


class PhpFpmStack(FrontedServer):
    """nginx `fastcgi_pass unix:` → PHP-FPM, its pool [app] static of `slots` children
    running a script that sleeps ?ms=N."""

    name = "php-fpm"

    @property
    def socket(self) -> Path:
        return self.workdir / "app.sock"

    @property
    def access_log(self) -> Path:
        return self.workdir / "fpm-access.log"

    def _start_server(self) -> Child:
        root = self.workdir
        (root / "app.php").write_text(PHP_SCRIPT)
        (root / "pool.d").mkdir(exist_ok=True)
        (root / "php-fpm.conf").write_text(
            f"[global]\npid = {self.pid_file}\nerror_log = {root / 'fpm-error.log'}\n"
            f"daemonize = no\ninclude = {root / 'pool.d'}/*.conf\n"
        )
        escaped = FPM_FORMAT.replace('"', '\\"')
        (root / "pool.d" / "app.conf").write_text(
            f"[app]\nlisten = {self.socket}\nlisten.backlog = 511\npm = static\n"
            f"pm.max_children = {self.slots}\naccess.log = {self.access_log}\n"
            f'access.format = "{escaped}"\n'
        )
        # As root, PHP-FPM's workers run as root only when told they may (-R).
        as_root = ["-R"] if os.geteuid() == 0 else []
        argv = [str(php_fpm_binary()), "-y", str(root / "php-fpm.conf"), "-F", *as_root]
        return Child(self.name, argv, root / f"{self.name}.out", dict(os.environ))

    def _listening(self) -> bool:
        return self.socket.exists() and self.pid_file.exists()

    def _location(self) -> str:
        return (
            "include /etc/nginx/fastcgi_params; "
            f"fastcgi_param SCRIPT_FILENAME {self.workdir / 'app.php'}; "
            f"fastcgi_pass unix:{self.socket};"
        )

    def server_component(self) -> dict[str, Any]:
        return {
            "name": self.name, "role": "app_server", "calls": [], "workers": self.slots,
            "log": {"path": str(self.access_log), "format": "php-fpm", "log_format": FPM_FORMAT},
            "process": {"pid_file": str(self.pid_file)},
        }  # fmt: skip


class TomcatStack(FrontedServer):
    """nginx `proxy_pass` → Tomcat 10, one HTTP connector of `slots` maxThreads, a JSP
    that sleeps ?ms=N."""

    name = "tomcat"
    startup_timeout_s = 60.0

    @property
    def access_log(self) -> Path:
        return self.workdir / "logs" / "access.log"

    def path(self, cpu_ms: float, wait_ms: float, block: bool = False) -> str:
        return f"/work.jsp?ms={wait_ms:.2f}"

    def _start_server(self) -> Child:
        root = self.workdir
        for folder in ("conf", "logs", "temp", "work", "webapps/ROOT"):
            (root / folder).mkdir(parents=True, exist_ok=True)
        (root / "conf" / "server.xml").write_text(self._server_xml())
        shutil.copy(TOMCAT_HOME / "etc" / "web.xml", root / "conf" / "web.xml")
        (root / "webapps" / "ROOT" / "work.jsp").write_text(JSP)
        bin_dir = TOMCAT_HOME / "bin"
        argv = [
            str(shutil.which("java")), "-Xshare:auto", "-XX:TieredStopAtLevel=1",
            f"-Dhttp.port={self.server_port}", f"-Dcatalina.home={TOMCAT_HOME}",
            f"-Dcatalina.base={root}", f"-Djava.io.tmpdir={root / 'temp'}",
            "-cp", f"{bin_dir / 'bootstrap.jar'}:{bin_dir / 'tomcat-juli.jar'}",
            "org.apache.catalina.startup.Bootstrap", "start",
        ]  # fmt: skip
        # As catalina.sh does with CATALINA_PID: the file its JVM's pid is written to.
        env = {**os.environ, "CATALINA_PID": str(self.pid_file)}
        child = Child(self.name, argv, root / f"{self.name}.out", env)
        self.pid_file.write_text(f"{child.pid}\n")
        return child

    def _server_xml(self) -> str:
        pattern = TOMCAT_PATTERN.replace('"', "&quot;")
        return f"""<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1">
  <Service name="Catalina">
    <Connector address="{HOST}" port="${{http.port}}" protocol="HTTP/1.1"
               maxThreads="{self.slots}" acceptCount="511"/>
    <Engine name="Catalina" defaultHost="localhost">
      <Host name="localhost" appBase="webapps" unpackWARs="false" autoDeploy="false">
        <Valve className="org.apache.catalina.valves.AccessLogValve" directory="logs"
               prefix="access" suffix=".log" rotatable="false" buffered="false"
               pattern="{pattern}"/>
      </Host>
    </Engine>
  </Service>
</Server>
"""

    def _listening(self) -> bool:
        return _listens(self.server_port)

    def _ready(self) -> None:
        """Compiles the JSP with one request, so the load does not wait for it."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        url = f"http://{HOST}:{self.server_port}/work.jsp?ms=0"
        with opener.open(url, timeout=60) as answer:
            answer.read()

    def _location(self) -> str:
        return "proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection '';"

    def server_component(self) -> dict[str, Any]:
        return {
            "name": self.name, "role": "app_server", "calls": [], "workers": self.slots,
            "log": {"path": str(self.access_log), "format": "tomcat",
                    "log_format": TOMCAT_PATTERN},
            "process": {"pid_file": str(self.pid_file)},
        }  # fmt: skip


class NodeStack(FrontedServer):
    """nginx `proxy_pass` → Node.js running Express in one process (one event loop),
    logging with morgan; ?cpu=C computes C ms on the loop, ?wait=W&block=1 holds it."""

    name = "node"

    @property
    def access_log(self) -> Path:
        return self.workdir / "morgan.log"

    def _start_server(self) -> Child:
        app = self.workdir / "app.js"
        app.write_text(NODE_APP)
        argv = [str(shutil.which("node")), str(app), str(self.server_port)]
        argv += [str(self.access_log), MORGAN_LINE]
        env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
        child = Child(self.name, argv, self.workdir / f"{self.name}.out", env)
        self.pid_file.write_text(f"{child.pid}\n")
        return child

    def _listening(self) -> bool:
        return _listens(self.server_port)

    def _location(self) -> str:
        return "proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection '';"

    def server_component(self) -> dict[str, Any]:
        """No `workers`: one event loop, not a pool of slots."""
        return {
            "name": self.name, "role": "app_server", "calls": [],
            "log": {"path": str(self.access_log), "format": "morgan", "log_format": MORGAN_LINE},
            "process": {"pid_file": str(self.pid_file)},
        }  # fmt: skip


STACKS: dict[str, type[FrontedServer]] = {
    "php-fpm": PhpFpmStack,
    "tomcat": TomcatStack,
    "node": NodeStack,
}


def _listens(port: int) -> bool:
    import socket

    try:
        socket.create_connection((HOST, port), timeout=0.2).close()
        return True
    except OSError:
        return False


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:] if path.exists() else f"({path} is empty)"
