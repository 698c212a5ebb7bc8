"""One py-spy run: `py-spy record --nonblocking --subprocesses` on a process for a bounded
time, its folded stacks written to a file, and why it failed when it did (no py-spy, no
permission to trace)."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# How long py-spy gets past its duration to write its output, and after an interrupt.
GRACE_S = 5.0
PTRACE_HINT = (
    "py-spy needs to trace the process: run as root, or with CAP_SYS_PTRACE, or with "
    "kernel.yama.ptrace_scope at 0"
)


def pyspy_path() -> str | None:
    """The py-spy executable: on PATH, or beside this Python's (a venv's bin)."""
    found = shutil.which("py-spy")
    if found is not None:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.is_file() else None


def pyspy_version(path: str) -> str:
    """`py-spy 0.4.3`, or "py-spy" when it does not say."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "py-spy"
    return done.stdout.strip() or "py-spy"


@dataclass
class SpyRun:
    """py-spy recording one process tree into `output` for `duration_s` at `rate_hz`."""

    pid: int
    output: Path
    duration_s: int  # py-spy counts whole seconds
    rate_hz: int
    started: float = 0.0
    ended: float = 0.0
    problem: str | None = None
    cpu_s: float = 0.0  # py-spy's own CPU time, user + system
    _proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    def start(self, exe: str) -> None:
        """Starts py-spy; a failure to start, or tracing refused, becomes `problem`."""
        self.started = time.time()
        self.problem = tracing_refused(self.pid)
        if self.problem is not None:
            return
        argv = [
            exe, "record", "--nonblocking", "--subprocesses", "--function",
            "--format", "raw", "--pid", str(self.pid),
            "--rate", str(self.rate_hz), "--duration", str(self.duration_s),
            "--output", str(self.output),
        ]  # fmt: skip
        try:
            self._proc = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "RUST_BACKTRACE": "0"},
            )  # fmt: skip
        except OSError as e:
            self.problem = f"py-spy did not start: {e}"

    def finish(self, interrupt: bool = False) -> None:
        """Waits for py-spy to write its stacks (interrupting it first when asked: it then
        writes what it has); a failure becomes `problem`."""
        proc = self._proc
        if proc is None:
            return
        self._proc = None
        # The CPU of the children reaped from here on: py-spy's (poll may reap it).
        before = _children_cpu_s()
        if interrupt and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=self.duration_s + GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            self.problem = f"py-spy did not end within {self.duration_s + GRACE_S:.0f} s"
        self.cpu_s = _children_cpu_s() - before
        # py-spy stops on its own after its duration; sooner when interrupted.
        self.ended = min(time.time(), self.started + self.duration_s)
        if self.problem is None and (proc.returncode != 0 or not self.output.is_file()):
            self.problem = f"py-spy could not sample pid {self.pid}: {_reason(err)}"


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def tracing_refused(pid: int) -> str | None:
    """Why this process may not read `pid`'s memory, as py-spy must; None when it may. The
    kernel checks the right to trace when /proc/<pid>/mem is opened."""
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            return None
    except FileNotFoundError:
        return None  # not Linux's /proc, or gone: py-spy says
    except PermissionError as e:
        return f"tracing pid {pid} is refused ({e.strerror}): {PTRACE_HINT}"
    except OSError:
        return None


def _reason(stderr: str) -> str:
    """py-spy's own words for a failure: its last line that says something."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "permission" in line.lower()]
    chosen = (errors or lines or ["it exited without a reason"])[-1].removeprefix("Error: ")
    if "permission" in chosen.lower() or "not permitted" in chosen.lower():
        chosen += f" ({PTRACE_HINT})"
    return chosen.strip()
