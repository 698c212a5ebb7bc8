"""The demo stack: nginx → gunicorn → Flask on loopback, owned and always stopped by pinchpoint."""

import atexit
import contextlib
import functools
import http.client
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, ClassVar, Self

import psutil

import pinchpoint
from pinchpoint.collect.formats.gunicorn import GUNICORN_FORMAT
from pinchpoint.collect.formats.nginx import NGINX_FORMAT
from pinchpoint.demo.env import DB_ENV, PROBE_LOG_ENV
from pinchpoint.demo.errors import StackError, StackTerminated
from pinchpoint.demo.nginx import (
    NginxPaths,
    ProxyOptions,
    check_config,
    find_nginx,
    nginx_argv,
    render_config,
)
from pinchpoint.demo.procs import Child

HOST = "127.0.0.1"
READY_PATH = "/healthz"
_TAIL_LINES = 20


class DemoStack:
    """nginx on 127.0.0.1 proxying to gunicorn running the demo app, all files in workdir.

    Use as a context manager: the processes are stopped on exit, on exceptions, on Ctrl-C and
    on SIGTERM (turned into StackTerminated, a KeyboardInterrupt, while the stack runs).

    `proxy` sets how nginx passes requests on (and a connection limit); `app_env` adds
    environment variables for the app (a database's address). Subclasses run another
    application server by overriding server_name, _server_argv, _server_env and
    _server_component.
    """

    server_name: ClassVar[str] = "gunicorn"

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
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.nginx_port, self.gunicorn_port = _ports(nginx_port, gunicorn_port)
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.proxy = proxy or ProxyOptions()
        self.app_env = dict(app_env or {})
        self._nginx_paths = NginxPaths(self.workdir)
        self.url = f"http://{HOST}:{self.nginx_port}"
        self.gunicorn_url = f"http://{HOST}:{self.gunicorn_port}"
        self.nginx_conf = self._nginx_paths.conf
        self.nginx_access_log = self._nginx_paths.access_log
        self.nginx_pid_file = self._nginx_paths.pid_file
        self.gunicorn_access_log = self.workdir / "gunicorn-access.log"
        self.gunicorn_pid_file = self.workdir / "gunicorn.pid"
        self.probe_log = self.workdir / "probe.log"
        self.db_path = self.workdir / "demo.sqlite3"
        self._nginx: Child | None = None
        self._gunicorn: Child | None = None
        self._previous_sigterm: Any = None
        self._sigterm_installed = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Writes and checks the nginx config, starts gunicorn then nginx, waits for both."""
        if self._gunicorn is not None:
            raise StackError("the demo stack is already started")
        nginx = find_nginx()
        self._check_server()
        self._nginx_paths.temp_dir.mkdir(parents=True, exist_ok=True)
        self.nginx_conf.write_text(
            render_config(
                self._nginx_paths, self.nginx_port, self.gunicorn_port, _is_root(), self.proxy
            )
        )
        check_config(nginx, self._nginx_paths)
        atexit.register(self.stop)
        self._install_sigterm_handler()
        try:
            self._gunicorn = Child(
                self.server_name,
                self._server_argv(),
                self.workdir / f"{self.server_name}.out",
                self._server_env(),
            )
            self._wait_ready(
                self._gunicorn, self.gunicorn_port, self._server_logs(), self._server_answers
            )
            self._wait_workers()
            self._nginx = Child(
                "nginx",
                nginx_argv(nginx, self._nginx_paths),
                self.workdir / "nginx.out",
                dict(os.environ),
            )
            self._wait_ready(self._nginx, self.nginx_port, self._nginx_logs())
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stops nginx then gunicorn (SIGTERM, SIGKILL after stop_timeout_s); idempotent."""
        nginx, gunicorn = self._nginx, self._gunicorn
        self._nginx = self._gunicorn = None
        try:
            if nginx is not None:
                nginx.stop(self.stop_timeout_s)
        finally:
            try:
                if gunicorn is not None:
                    gunicorn.stop(self.stop_timeout_s)
            finally:
                self._restore_sigterm_handler()
                atexit.unregister(self.stop)

    def components(self) -> list[dict[str, Any]]:
        """The stack's components as the plan describes them."""
        server = self._server_component()
        return [
            {
                "name": "nginx",
                "role": "proxy",
                "calls": [server["name"]],
                "log": {
                    "path": str(self.nginx_access_log),
                    "format": "nginx",
                    "log_format": NGINX_FORMAT,
                },
                "process": {"pid_file": str(self.nginx_pid_file)},
            },
            server,
            {
                "name": "app",
                "role": "app",
                "calls": [],
                "log": {"path": str(self.probe_log), "format": "probe"},
            },
        ]

    def _check_server(self) -> None:
        missing = [name for name in ("flask", "gunicorn") if importlib.util.find_spec(name) is None]
        if missing:
            raise StackError(
                f"the demo stack needs {' and '.join(missing)}: pip install 'pinchpoint[demo]'"
            )

    def _server_component(self) -> dict[str, Any]:
        return {
            "name": "gunicorn",
            "role": "app_server",
            "calls": ["app"],
            "workers": self.workers,
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
        argv = [
            sys.executable, "-m", "gunicorn",
            "--workers", str(self.workers),
            "--worker-class", "sync",
            "--bind", f"{HOST}:{self.gunicorn_port}",
            "--access-logfile", str(self.gunicorn_access_log),
            "--access-logformat", GUNICORN_FORMAT,
            "--error-logfile", str(self.workdir / "gunicorn-error.log"),
            "--pid", str(self.gunicorn_pid_file),
            "--backlog", "2048",
            "--timeout", "60",
            "--graceful-timeout", str(max(1, int(self.stop_timeout_s) - 2)),
            # Import the app once before forking: workers are ready when the stack is, and
            # the first load step does not measure two dozen interpreters importing Flask.
            "--preload",
        ]  # fmt: skip
        if _gunicorn_has_control_socket():
            # Else every stack of this user would share one socket in ~/.gunicorn.
            argv.append("--no-control-socket")
        return [*argv, "pinchpoint.demo.app:wsgi()"]

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

    def _nginx_logs(self) -> list[Path]:
        return [self._nginx_paths.error_log, self.workdir / "nginx.out"]

    def _server_answers(self, port: int) -> bool:
        """Whether the application server answers on port (over HTTP for gunicorn)."""
        return _answers(port)

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


def _answers(port: int) -> bool:
    conn = http.client.HTTPConnection(HOST, port, timeout=2.0)
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


@functools.cache
def _gunicorn_has_control_socket() -> bool:
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--help"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return "--no-control-socket" in result.stdout
