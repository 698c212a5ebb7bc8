"""The demo stack with uWSGI instead of gunicorn: nginx `uwsgi_pass` → uWSGI → the demo app.

Two uWSGI builds work:

- a uWSGI installed into this Python's environment (`pip install uwsgi`, built from source):
  its Python is this one, and it runs in this environment (`--virtualenv sys.prefix`);
- Debian's (`apt-get install uwsgi-core uwsgi-plugin-python3`), whose python3 plugin embeds
  the system's /usr/bin/python3. The stack then makes a virtual environment with that
  Python in its workdir, whose `.pth` file adds this environment's packages (Flask) and
  pinchpoint, so the app imports the same code. That needs the same Python minor version
  (compiled packages are built for it); otherwise StackError says what to install.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pinchpoint
from pinchpoint.demo.errors import StackError
from pinchpoint.demo.nginx import ProxyOptions
from pinchpoint.demo.stack import HOST, DemoStack

SYSTEM_PYTHON = Path("/usr/bin/python3")
PLUGIN_DIRS = (Path("/usr/lib/uwsgi/plugins"), Path("/usr/lib/uwsgi"))
APP = "pinchpoint.demo.app:wsgi()"
_SETUP_TIMEOUT_S = 60


@dataclass(frozen=True)
class Uwsgi:
    """A uWSGI binary: embedded in this Python (pip) or taking the python3 plugin (Debian)."""

    binary: Path
    plugin: bool


def find_uwsgi() -> Uwsgi | None:
    """This environment's uWSGI, else one on PATH with a python3 plugin; None if neither."""
    own = Path(sys.executable).parent / "uwsgi"
    if own.is_file():
        return Uwsgi(own, plugin=False)
    found = shutil.which("uwsgi")
    if found is None:
        return None
    has_plugin = any((d / "python3_plugin.so").is_file() for d in PLUGIN_DIRS)
    return Uwsgi(Path(found), plugin=has_plugin) if has_plugin else None


def system_python_matches() -> bool:
    """Whether /usr/bin/python3 has this Python's minor version (the plugin's packages)."""
    if not SYSTEM_PYTHON.is_file():
        return False
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(*sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout.split() == [str(n) for n in sys.version_info[:2]]


def make_venv(folder: Path) -> Path:
    """A virtual environment of the system's Python that sees this environment's packages."""
    done = subprocess.run(
        [str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", "--system-site-packages", str(folder)],
        capture_output=True,
        text=True,
        timeout=_SETUP_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise StackError(f"could not make a venv for uWSGI in {folder}:\n{done.stderr}")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = folder / "lib" / version / "site-packages"
    package_root = Path(pinchpoint.__file__).resolve().parent.parent
    paths = dict.fromkeys(
        [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], str(package_root)]
    )
    (site / "pinchpoint-demo.pth").write_text("\n".join(paths) + "\n")
    return folder


class UwsgiStack(DemoStack):
    """nginx → uWSGI (`--processes workers`, uwsgi protocol) → the demo app, in workdir.

    With threads > 1, each process runs that many threads (`--threads`, `--enable-threads`)
    and the component's `workers` is processes × threads. The proxy speaks uWSGI's protocol
    by default; with ProxyOptions(protocol="http") (the default for front="haproxy", which
    speaks only HTTP) uWSGI listens with `--http-socket`. Other options as DemoStack's,
    but worker_class.

    uWSGI logs each request with `--log-micros` to `uwsgi_access_log`, in its default
    request-line format (the `uwsgi` format preset). With server_config="file" the options
    are in `uwsgi.ini` in workdir and uWSGI runs as `uwsgi --ini uwsgi.ini`.
    """

    server_name: ClassVar[str] = "uwsgi"
    # uWSGI's master took a second to leave after SIGTERM or SIGINT, each time; the stack
    # is stopped once its logs are read, so nothing is lost by killing it.
    server_stop_signal: ClassVar[signal.Signals] = signal.SIGKILL

    def __init__(
        self, workdir: Path, workers: int = 2, *, threads: int = 1, **options: Any
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if "worker_class" in options:
            raise ValueError("worker_class is gunicorn's; uWSGI takes processes and threads")
        if options.get("front", "nginx") != "haproxy":
            options.setdefault("proxy", ProxyOptions(protocol="uwsgi"))
        super().__init__(workdir, workers, **options)
        self.threads = threads
        self.uwsgi_port = self.gunicorn_port
        self.uwsgi_access_log = self.workdir / "uwsgi-requests.log"
        self.uwsgi_pid_file = self.workdir / "uwsgi.pid"
        self.gunicorn_pid_file = self.uwsgi_pid_file
        self._uwsgi: Uwsgi | None = None

    def _check_server(self) -> None:
        self._uwsgi = find_uwsgi()
        if self._uwsgi is None:
            raise StackError(
                "uWSGI is not installed: `pip install uwsgi` into this environment, or "
                "`apt-get install uwsgi-core uwsgi-plugin-python3`"
            )
        if self._uwsgi.plugin and not system_python_matches():
            raise StackError(
                f"Debian's uWSGI plugin runs {SYSTEM_PYTHON}, not Python "
                f"{sys.version_info[0]}.{sys.version_info[1]} as here: `pip install uwsgi` "
                "into this environment instead"
            )

    def _server_argv(self) -> list[str]:
        assert self._uwsgi is not None
        options = self._options()
        if self.server_config == "file":
            ini = self.workdir / "uwsgi.ini"
            ini.write_text(ini_text(options))
            return [str(self._uwsgi.binary), "--ini", str(ini)]
        return [str(self._uwsgi.binary), *option_argv(options)]

    def _options(self) -> list[tuple[str, str]]:
        """uWSGI's options in order, "true" for a flag; the plugins first, as they define
        the options after them."""
        assert self._uwsgi is not None
        if self._uwsgi.plugin:
            venv = make_venv(self.workdir / "uwsgi-venv")
            # Debian builds the file logger as a plugin as well.
            plugins = [("plugins", "python3,logfile")]
        else:
            venv, plugins = Path(sys.prefix), []
        package_root = Path(pinchpoint.__file__).resolve().parent.parent
        return [
            *plugins,
            ("master", "true"),
            ("processes", str(self.workers)),
            *self._socket_options(),
            ("virtualenv", str(venv)),
            ("pythonpath", str(package_root)),
            ("module", APP),
            ("need-app", "true"),
            ("pidfile", str(self.uwsgi_pid_file)),
            ("die-on-term", "true"),
            ("log-micros", "true"),
            ("req-logger", f"file:{self.uwsgi_access_log}"),
            ("listen", "100"),
        ]

    def _socket_options(self) -> list[tuple[str, str]]:
        kind = "socket" if self.proxy.protocol == "uwsgi" else "http-socket"
        options = [(kind, f"{HOST}:{self.uwsgi_port}")]
        if self.threads > 1:
            options += [("threads", str(self.threads)), ("enable-threads", "true")]
        return options

    def _server_logs(self) -> list[Path]:
        return [self.workdir / "uwsgi.out"]

    def _server_answers(self, port: int) -> bool:
        # uWSGI speaks its own protocol there: a connection accepted is enough; the workers
        # are waited for next, and nginx's health check goes through them end to end.
        try:
            with socket.create_connection((HOST, port), timeout=2.0):
                return True
        except OSError:
            return False

    def _server_component(self) -> dict[str, Any]:
        return {
            "name": "uwsgi",
            "role": "app_server",
            "calls": ["app"],
            "workers": self.workers * self.threads,
            "log": {"path": str(self.uwsgi_access_log), "format": "uwsgi"},
            "process": {"pid_file": str(self.uwsgi_pid_file)},
        }


def option_argv(options: list[tuple[str, str]]) -> list[str]:
    """uWSGI's options as its command line: `--key value`, a flag alone."""
    argv: list[str] = []
    for key, value in options:
        argv += [f"--{key}"] if value == "true" else [f"--{key}", value]
    return argv


def ini_text(options: list[tuple[str, str]]) -> str:
    """uWSGI's options as an ini file for `uwsgi --ini`."""
    return "[uwsgi]\n" + "".join(f"{key} = {value}\n" for key, value in options)
