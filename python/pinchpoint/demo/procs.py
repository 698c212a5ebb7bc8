"""Child processes that lead their own process group and are always stopped, group and all."""

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from pinchpoint.demo.errors import StackError

_POLL_S = 0.02


class Child:
    """A started command, leader of a new session, its stdout and stderr appended to a file."""

    def __init__(self, name: str, argv: list[str], output: Path, env: dict[str, str]) -> None:
        self.name = name
        self.output = output
        with output.open("ab") as out:
            self._proc = subprocess.Popen(
                _with_parent_death_signal(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self._proc.pid

    def exited(self) -> bool:
        """Whether the leader has exited, without reaping it (its pid keeps naming the group)."""
        if self._proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def stop(self, timeout_s: float = 10.0, sig: int = signal.SIGTERM) -> None:
        """Sends sig to the group, SIGKILL after timeout_s, then reaps the leader."""
        if self._proc.returncode is not None:
            return
        try:
            self._signal_group(sig)
            if not self._wait_exited(timeout_s):
                self._signal_group(signal.SIGKILL)
                self._wait_exited(5.0)
        finally:
            # The leader is not reaped yet, so the group id cannot belong to anyone else:
            # this takes down any straggler even when the wait above was interrupted.
            self._signal_group(signal.SIGKILL)
        try:
            self._proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired as exc:
            raise StackError(f"{self.name} (pid {self.pid}) survived SIGKILL") from exc

    def _wait_exited(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.exited():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)
        return True

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)


def _with_parent_death_signal(argv: list[str]) -> list[str]:
    # If pinchpoint itself is SIGKILLed, the kernel sends the child SIGTERM, so even then the
    # stack shuts down. (The signal follows the thread that started the child.)
    setpriv = _setpriv()
    return [setpriv, "--pdeathsig", "TERM", "--", *argv] if setpriv else argv


@functools.cache
def _setpriv() -> str | None:
    setpriv = shutil.which("setpriv") if sys.platform == "linux" else None
    if setpriv is None:
        return None
    probe = subprocess.run(
        [setpriv, "--pdeathsig", "TERM", "--", "true"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
        check=False,
    )
    return setpriv if probe.returncode == 0 else None


def check_config(argv: list[str], server: str, conf: Path, timeout_s: float) -> None:
    """Runs a server's own config check (`nginx -t`, `haproxy -c`); StackError with the
    server's message when it rejects the config."""
    result = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        message = (result.stderr + result.stdout).strip() or f"exit status {result.returncode}"
        raise StackError(f"{server} rejected the demo config {conf}:\n{message}")
