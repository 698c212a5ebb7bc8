"""The demo stack with uvicorn instead of gunicorn: nginx → uvicorn (`--workers N`, an
event loop in each process) → the lab's bare ASGI app (asgi_probe.py), as uvicorn's docs
deploy it behind nginx. The plan knows uvicorn by its processes alone: it logs nothing."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import psutil

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.stack import DemoStack

APP = "pinchpoint_lab.asgi_probe:app"


class UvicornStack(DemoStack):
    """nginx → uvicorn with `workers` processes (one, without a supervisor, for 1)."""

    server_name: ClassVar[str] = "uvicorn"

    def _check_server(self) -> None:
        if importlib.util.find_spec("uvicorn") is None:
            raise StackError("the uvicorn stack needs uvicorn: pip install uvicorn")

    def _server_argv(self) -> list[str]:
        return [
            sys.executable, "-m", "uvicorn", APP, "--host", self.server_host,
            "--port", str(self.gunicorn_port), "--workers", str(self.workers),
            "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip

    def _server_env(self) -> dict[str, str]:
        env = self._app_env()
        env.pop("WEB_CONCURRENCY", None)
        return env

    def _server_logs(self) -> list[Path]:
        return [self.workdir / "uvicorn.out"]

    def _wait_workers(self) -> None:
        assert self._gunicorn is not None
        if self.workers == 1:
            return
        master = psutil.Process(self._gunicorn.pid)
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                if len(master.children()) >= self.workers:
                    return
            time.sleep(0.05)
        raise StackError(f"uvicorn did not start {self.workers} workers")

    def server_pids(self) -> list[int]:
        assert self._gunicorn is not None
        master = psutil.Process(self._gunicorn.pid)
        return [master.pid, *(c.pid for c in master.children(recursive=True))]

    def components(self) -> list[dict[str, Any]]:
        """nginx, which calls uvicorn; uvicorn by its processes, with no log."""
        uvicorn = {"name": "uvicorn", "role": "app_server", "calls": [],
                   "process": {"pids": self.server_pids()}}  # fmt: skip
        return [*self._front_components("uvicorn"), uvicorn]
