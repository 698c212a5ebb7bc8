"""A server the lab starts for a test on 127.0.0.1 and a free port, in a folder of its
own under the system's temp folder: while it runs, its address is in an environment
variable (which a plan component names); on exit it is stopped and its folder removed.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.procs import Child
from pinchpoint.lifecycle import Started
from pinchpoint_lab.ports import HOST, free_port


class DataServer(Started):
    """The folder, the port, the server's process, its stop and the wait for it."""

    # The server's name in errors ("Redis did not answer on ...").
    title = "the server"
    # How it is asked to stop, and how long it gets before SIGKILL.
    stop_signal = signal.SIGTERM
    stop_s = 20.0

    def __init__(self, startup_timeout_s: float) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.folder: Path | None = None
        self.port = free_port()
        self._server: Child | None = None

    @property
    def address_env(self) -> str:
        """The environment variable that holds the server's address while it runs."""
        raise NotImplementedError

    @property
    def pid(self) -> int:
        assert self._server is not None
        return self._server.pid

    def stop(self) -> None:
        """`stop_signal`, SIGKILL after `stop_s`; removes the folder. Idempotent."""
        server, self._server = self._server, None
        folder, self.folder = self.folder, None
        os.environ.pop(self.address_env, None)
        try:
            if server is not None:
                server.stop(self.stop_s, sig=self.stop_signal)
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def _wait_answering(self, answers: Callable[[], bool], log: str, pause_s: float = 0.1) -> None:
        """Until `answers()`; StackError with the end of the folder's `log` when the server
        exits or `startup_timeout_s` passes first."""
        assert self._server is not None and self.folder is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._server.exited():
            if answers():
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(pause_s)
        path = self.folder / log
        text = path.read_text(errors="replace")[-3000:] if path.exists() else ""
        raise StackError(f"{self.title} did not answer on {HOST}:{self.port}:\n{text}")
