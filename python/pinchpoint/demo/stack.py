"""The demo stack: a proxy → gunicorn → the demo app on loopback, owned and always stopped
by pinchpoint."""

import atexit
import contextlib
import dataclasses
import http.client
import importlib.util
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, ClassVar, Literal

import psutil

import pinchpoint
from pinchpoint.demo.env import DB_ENV, PROBE_LOG_ENV
from pinchpoint.demo.errors import StackError, StackTerminated
from pinchpoint.demo.gunicorn import check_worker_class, gunicorn_argv, pool_config, slots
from pinchpoint.demo.haproxy import (
    HaproxyPaths,
    check_options,
    find_haproxy,
    haproxy_argv,
    haproxy_component,
)
from pinchpoint.demo.haproxy import (
    check_config as check_haproxy_config,
)
from pinchpoint.demo.haproxy import (
    render_config as render_haproxy_config,
)
from pinchpoint.demo.nginx import (
    NginxPaths,
    ProxyOptions,
    check_config,
    find_nginx,
    nginx_argv,
    nginx_component,
    render_config,
)
from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT

HOST = "127.0.0.1"
READY_PATH = "/healthz"
_TAIL_LINES = 20
FRONTS = ("nginx", "haproxy", "nginx2")
SERVER_CONFIGS = ("flags", "file")


@dataclass(frozen=True)
class Front:
    """A proxy of the stack, as started: its name, port, command, output and logs."""

    name: str
    port: int
    argv: list[str]
    output: Path
    logs: list[Path]
    # Set for a program that writes no pid file of its own in the foreground.
    pid_file: Path | None = None


class DemoStack(Started):
    """A proxy on 127.0.0.1 passing to gunicorn running the demo app, all files in workdir.

    Use as a context manager: the processes are stopped on exit, on exceptions, on Ctrl-C and
    on SIGTERM (turned into StackTerminated, a KeyboardInterrupt, while the stack runs).

    front: "nginx" (component "nginx"), "haproxy" (component "haproxy") or "nginx2": an
    edge nginx (component "edge") → an inner nginx ("nginx") → the server. `nginx_port` is
    the port of the front (the edge for "nginx2"). `proxy` sets how the proxy next to the
    server passes requests on and limits them (`edge` the same for the edge nginx). nginx
    and HAProxy answer `/static` themselves (the edge nginx passes it on).

    worker_class: "sync", "gthread" (with `threads` a worker) or "uvicorn" (the ASGI app
    on an event loop); the component's `workers` is the requests gunicorn serves at once
    (workers, workers × threads), and absent for uvicorn (see demo/gunicorn.py).

    server_config: "flags" sets the server's pool on its command line; "file" writes it
    to a config file the server reads (gunicorn's `-c gunicorn.conf.py`), as users
    configure it either way.

    `app_env` adds environment variables for the app (a database's address). Subclasses
    run another application server by overriding server_name, _server_argv, _server_env
    and _server_component.
    """

    server_name: ClassVar[str] = "gunicorn"
    # What stop() sends the server's process group first (SIGKILL follows stop_timeout_s on).
    server_stop_signal: ClassVar[signal.Signals] = signal.SIGTERM

    def __init__(
        self,
        workdir: Path,
        workers: int = 2,
        nginx_port: int | None = None,
        gunicorn_port: int | None = None,
        startup_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        proxy: ProxyOptions | None = None,
        app_env: Mapping[str, str] | None = None,
        *,
        worker_class: str = "sync",
        threads: int = 1,
        front: str = "nginx",
        edge: ProxyOptions | None = None,
        server_netns: tuple[list[str], str] | None = None,
        server_config: Literal["flags", "file"] = "flags",
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        check_worker_class(worker_class, threads)
        if front not in FRONTS:
            raise ValueError(f"front must be one of {FRONTS}, got {front!r}")
        if edge is not None and front != "nginx2":
            raise ValueError("edge sets the edge nginx of front='nginx2'")
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.worker_class = worker_class
        self.threads = threads
        self.front = front
        if server_config not in SERVER_CONFIGS:
            raise ValueError(
                f"server_config must be one of {SERVER_CONFIGS}, got {server_config!r}"
            )
        self.server_config = server_config
        self.nginx_port, self.gunicorn_port = _ports(nginx_port, gunicorn_port)
        self.inner_port = _other_port(self.nginx_port, self.gunicorn_port)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.proxy = proxy or ProxyOptions()
        self.edge = edge or ProxyOptions()
        if front == "haproxy":
            check_options(self.proxy)
        elif self.proxy.maxconn is not None or self.edge.maxconn is not None:
            raise ValueError("maxconn is HAProxy's: set front='haproxy'")
        if self.edge.protocol != "http":
            raise ValueError("the edge nginx passes requests to the inner one over http")
        self.app_env = dict(app_env or {})
        # The application server inside a network namespace: the argv prefix that runs a
        # command there, and its address (pinchpoint_lab/netns.py makes one for the tests);
        # the proxy calls it there.
        self._server_prefix, self.server_host = server_netns or ([], HOST)
        if server_netns is not None:
            self.proxy = dataclasses.replace(self.proxy, upstream_host=self.server_host)
        self._nginx_paths = NginxPaths(self.workdir)
        self._edge_paths = NginxPaths(self.workdir, "edge")
        self._haproxy_paths = HaproxyPaths(self.workdir)
        self.url = f"http://{HOST}:{self.nginx_port}"
        self.gunicorn_url = f"http://{HOST}:{self.gunicorn_port}"
        self.nginx_conf = self._nginx_paths.conf
        self.nginx_access_log = self._nginx_paths.access_log
        self.nginx_pid_file = self._nginx_paths.pid_file
        self.edge_access_log = self._edge_paths.access_log
        self.edge_pid_file = self._edge_paths.pid_file
        self.haproxy_log = self._haproxy_paths.log
        self.haproxy_pid_file = self._haproxy_paths.pid_file
        self.gunicorn_access_log = self.workdir / "gunicorn-access.log"
        self.gunicorn_pid_file = self.workdir / "gunicorn.pid"
        self.probe_log = self.workdir / "probe.log"
        self.db_path = self.workdir / "demo.sqlite3"
        self._fronts: list[Child] = []
        self._gunicorn: Child | None = None
        self._previous_sigterm: Any = None
        self._sigterm_installed = False

    def start(self) -> None:
        """Writes and checks the proxies' configs, starts gunicorn then the proxies from the
        server outwards, waits for each."""
        if self._gunicorn is not None:
            raise StackError("the demo stack is already started")
        self.workdir.mkdir(parents=True, exist_ok=True)
        fronts = self._prepare_fronts()
        self._check_server()
        atexit.register(self.stop)
        self._install_sigterm_handler()
        try:
            self._gunicorn = Child(
                self.server_name,
                [*self._server_prefix, *self._server_argv()],
                self.workdir / f"{self.server_name}.out",
                self._server_env(),
            )
            self._wait_ready(
                self._gunicorn, self.gunicorn_port, self._server_logs(), self._server_answers
            )
            self._wait_workers()
            for front in reversed(fronts):
                child = Child(front.name, front.argv, front.output, dict(os.environ))
                self._fronts.append(child)
                if front.pid_file is not None:
                    front.pid_file.write_text(f"{child.pid}\n")
                self._wait_ready(child, front.port, front.logs)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops the proxies from the front inwards, then gunicorn (SIGTERM, SIGKILL after
        stop_timeout_s); idempotent."""
        fronts, gunicorn = self._fronts, self._gunicorn
        self._fronts, self._gunicorn = [], None
        try:
            _stop_all(list(reversed(fronts)), self.stop_timeout_s)
        finally:
            try:
                if gunicorn is not None:
                    gunicorn.stop(self.stop_timeout_s, sig=self.server_stop_signal)
            finally:
                self._restore_sigterm_handler()
                atexit.unregister(self.stop)

    def components(self) -> list[dict[str, Any]]:
        """The stack's components as the plan describes them."""
        server = self._server_component()
        return [
            *self._front_components(server["name"]),
            server,
            {
                "name": "app",
                "role": "app",
                "calls": [],
                "log": {"path": str(self.probe_log), "format": "probe"},
            },
        ]

    def _front_components(self, server: str) -> list[dict[str, Any]]:
        if self.front == "haproxy":
            return [haproxy_component("haproxy", [server], self._haproxy_paths)]
        nginx = nginx_component("nginx", [server], self.nginx_access_log, self.nginx_pid_file)
        if self.front == "nginx":
            return [nginx]
        return [nginx_component("edge", ["nginx"], self.edge_access_log, self.edge_pid_file), nginx]

    def _prepare_fronts(self) -> list[Front]:
        """Writes and checks each proxy's config; the proxies from the front inwards."""
        if self.front == "haproxy":
            binary, ha_paths = find_haproxy(), self._haproxy_paths
            ha_paths.conf.write_text(
                render_haproxy_config(self.nginx_port, self.gunicorn_port, self.proxy)
            )
            check_haproxy_config(binary, ha_paths)
            argv = haproxy_argv(binary, ha_paths)
            # HAProxy logs to its stdout: its output file is its access log.
            return [
                Front(
                    "haproxy",
                    self.nginx_port,
                    argv,
                    ha_paths.log,
                    [ha_paths.log],
                    ha_paths.pid_file,
                )
            ]
        nginx = find_nginx()
        if self.front == "nginx":
            hops = [(self._nginx_paths, self.nginx_port, self.gunicorn_port, self.proxy, False)]
        else:
            hops = [
                (self._edge_paths, self.nginx_port, self.inner_port, self.edge, True),
                (self._nginx_paths, self.inner_port, self.gunicorn_port, self.proxy, False),
            ]
        fronts = []
        for paths, port, upstream, options, to_nginx in hops:
            paths.temp_dir.mkdir(parents=True, exist_ok=True)
            paths.conf.write_text(
                render_config(
                    paths,
                    port,
                    upstream,
                    _is_root(),
                    options,
                    static=not to_nginx,
                    keepalive=to_nginx,
                )
            )
            check_config(nginx, paths)
            output = self.workdir / f"{paths.prefix}.out"
            fronts.append(
                Front(
                    paths.prefix, port, nginx_argv(nginx, paths), output, [paths.error_log, output]
                )
            )
        return fronts

    def _check_server(self) -> None:
        needs = ["flask", "gunicorn"]
        if self.worker_class == "uvicorn":
            needs += ["starlette", "uvicorn"]
        missing = [name for name in needs if importlib.util.find_spec(name) is None]
        if missing:
            raise StackError(
                f"the demo stack needs {' and '.join(missing)}: pip install 'pinchpoint[demo]'"
            )

    def _server_component(self) -> dict[str, Any]:
        pool = slots(self.worker_class, self.workers, self.threads)
        return {
            "name": "gunicorn",
            "role": "app_server",
            "calls": ["app"],
            **({"workers": pool} if pool is not None else {}),
            "log": {
                "path": str(self.gunicorn_access_log),
                "format": "gunicorn",
                "log_format": GUNICORN_FORMAT,
            },
            "process": {"pid_file": str(self.gunicorn_pid_file)},
        }

    def _server_argv(self) -> list[str]:
        return self._gunicorn_argv()

    def _server_env(self) -> dict[str, str]:
        return self._app_env()

    def _gunicorn_argv(self) -> list[str]:
        config = None
        if self.server_config == "file":
            config = self.workdir / "gunicorn.conf.py"
            config.write_text(pool_config(self.workers, self.worker_class, self.threads))
        return gunicorn_argv(
            self.workdir,
            f"{self.server_host}:{self.gunicorn_port}",
            self.workers,
            self.worker_class,
            self.threads,
            config,
        )

    def _app_env(self) -> dict[str, str]:
        env = dict(os.environ)
        package_root = str(Path(pinchpoint.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        env[DB_ENV] = str(self.db_path)
        env[PROBE_LOG_ENV] = str(self.probe_log)
        env.update(self.app_env)
        return env

    def _server_logs(self) -> list[Path]:
        return [self.workdir / "gunicorn-error.log", self.workdir / "gunicorn.out"]

    def _server_answers(self, port: int) -> bool:
        """Whether the application server answers on port (over HTTP for gunicorn)."""
        return _answers(port, self.server_host)

    def _wait_ready(
        self,
        child: Child,
        port: int,
        logs: list[Path],
        answers: Callable[[int], bool] | None = None,
    ) -> None:
        answers = answers or _answers
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if child.exited():
                raise StackError(f"{child.name} exited while starting.\n{_tails(logs)}")
            if answers(port):
                return
            if time.monotonic() >= deadline:
                raise StackError(
                    f"{child.name} did not answer on {HOST}:{port} within "
                    f"{self.startup_timeout_s:g} s.\n{_tails(logs)}"
                )
            time.sleep(0.05)

    def _wait_workers(self) -> None:
        """Waits until the master has forked all workers, so the first load step gets them all."""
        assert self._gunicorn is not None
        master = psutil.Process(self._gunicorn.pid)
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._gunicorn.exited() and time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                if len(master.children()) >= self.workers:
                    return
            time.sleep(0.05)
        raise StackError(
            f"{self.server_name} did not start {self.workers} workers within "
            f"{self.startup_timeout_s:g} s.\n{_tails(self._server_logs())}"
        )

    def _install_sigterm_handler(self) -> None:
        # Someone else's handler (or SIG_IGN) wins: they own the process's shutdown.
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_terminated)
        self._sigterm_installed = True

    def _restore_sigterm_handler(self) -> None:
        if self._sigterm_installed and signal.getsignal(signal.SIGTERM) is _raise_terminated:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
        self._sigterm_installed = False


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise StackTerminated(f"received signal {signal.Signals(signum).name}")


def _answers(port: int, host: str = HOST) -> bool:
    conn = http.client.HTTPConnection(host, port, timeout=2.0)
    try:
        conn.request("GET", READY_PATH)
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _ports(nginx_port: int | None, gunicorn_port: int | None) -> tuple[int, int]:
    if nginx_port is not None and nginx_port == gunicorn_port:
        raise ValueError(f"nginx and gunicorn cannot both listen on port {nginx_port}")
    nginx_port = nginx_port or _free_port()
    while gunicorn_port is None or gunicorn_port == nginx_port:
        gunicorn_port = _free_port()
    return nginx_port, gunicorn_port


def _other_port(*taken: int) -> int:
    port = _free_port()
    while port in taken:
        port = _free_port()
    return port


def _stop_all(children: list[Child], timeout_s: float) -> None:
    """Stops each child in order, all of them even when one fails."""
    if not children:
        return
    try:
        children[0].stop(timeout_s)
    finally:
        _stop_all(children[1:], timeout_s)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _is_root() -> bool:
    return os.geteuid() == 0


def _tails(paths: list[Path]) -> str:
    parts = []
    for path in paths:
        try:
            lines = path.read_text(errors="replace").splitlines()[-_TAIL_LINES:]
        except FileNotFoundError:
            continue
        if lines:
            parts.append(f"--- last lines of {path} ---\n" + "\n".join(lines))
    return "\n".join(parts) or "(their logs are empty)"
