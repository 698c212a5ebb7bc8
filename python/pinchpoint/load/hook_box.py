"""A flow's hook in a box: it runs in a process of its own (load/hook_child.py) with a
budget per call and a cap on its memory, so a hook that spins, grows without end, exits or
kills its process stops the run with what was measured and a message, instead of
crashing pinchpoint, hanging it or taking the host's memory.

`HookBox` is the callable the engine calls as it called the hook itself (load/hooks.py):
`box(request, vars)` sends the request to the hook's process and returns the request as
the hook left it; the hook's own exception comes back as an exception of the same name,
which the engine records as a `capture` error. A call past its budget or its memory, or a
process that ends, makes the box `broken` (with the reason): the process is killed, the run is to be
stopped (load/engine.py does), and every later call fails at once once the run stops.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any, NoReturn

CHILD = "pinchpoint.load.hook_child"
# Time to start Python and import the hook's file.
START_BUDGET_S = 30.0
# The most memory a hook's process may hold: its heap and private mappings (RLIMIT_DATA),
# Python and the modules it starts with included (about 100 MiB of it, 50 MiB resident).
MEMORY_BYTES = 1 << 30
# The most a hook's answer may hold (its request with the body in base64).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# Once broken, how long the calls wait (all together, from the break) for the run to
# have stopped before they fail (the engine stops ~0.1 s after the break).
HELD_S = 1.0
# How long close() waits for a call in flight to leave.
CLOSE_WAIT_S = 2.0


class HookError(Exception):
    """The hook cannot run (load or start); the message names it."""


class HookStopped(Exception):
    """A call of a broken hook: past its budget, or its process ended."""


_RAISED: dict[str, type[Exception]] = {}


def _raised(name: str) -> type[Exception]:
    """An exception class named as the one the hook raised (the error says its name)."""
    if name not in _RAISED:
        _RAISED[name] = type(name if name.isidentifier() else "HookError", (Exception,), {})
    return _RAISED[name]


def _ended(status: int | None) -> str:
    if status is None:
        return "did not answer"
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


class HookBox:
    """The hook `spec` in its own process; `budget_s` the most one call may take,
    `memory_bytes` the most its process may hold."""

    def __init__(self, spec: str, budget_s: float, memory_bytes: int = MEMORY_BYTES) -> None:
        self.spec = spec
        self.budget_s = budget_s
        self.memory_bytes = memory_bytes
        # Why the box broke: `reason` as said of the hook, `broken` naming it.
        self.reason = ""
        self.broken: str | None = None
        self.calls = 0
        self._buffer = b""
        self._phase = "while loading the hook"
        self._closed = False
        self._held_until = 0.0
        self._lock = threading.Lock()
        self._in_call = threading.Event()
        self._closing = threading.Event()
        self.process = subprocess.Popen(
            [sys.executable, "-m", CHILD, spec, str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Its own session: a Ctrl-C reaches pinchpoint, which stops the run.
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._out = self.process.stdin.fileno()
        self._in = self.process.stdout.fileno()
        os.set_blocking(self._out, False)
        try:
            first = self._receive(
                time.monotonic() + START_BUDGET_S, f"it did not load within {START_BUDGET_S:g} s"
            )
        except HookStopped:
            self.close()
            raise HookError(f"hook {spec!r}: {self.reason}") from None
        if "error" in first:
            self.close()
            raise HookError(str(first["error"]))
        self._phase = "during a call"

    def __call__(self, request: dict, values: dict) -> dict:
        with self._lock:
            if self._closed:
                raise HookStopped(self.broken or f"the hook {self.spec}: its process has ended")
            self._in_call.set()
            try:
                if self.broken is None:
                    try:
                        return self._call(request, values)
                    except HookStopped:
                        pass
                # Broken: held until the run has stopped, then failed, so each user
                # waiting for the hook ends with one error, not a loop of them.
                self._closing.wait(max(self._held_until - time.monotonic(), 0.0))
                raise HookStopped(self.broken)
            finally:
                self._in_call.clear()

    def _call(self, request: dict, values: dict) -> dict:
        self.calls += 1
        message = {
            "step": request["step"],
            "method": request["method"],
            "path": request["path"],
            "headers": list(request["headers"]),
            "body": base64.b64encode(bytes(request["body"])).decode(),
            "vars": values,
        }
        deadline = time.monotonic() + self.budget_s
        self._send((json.dumps(message) + "\n").encode(), deadline)
        reply = self._receive(deadline, f"a call did not return within {self.budget_s:g} s")
        if "memory" in reply:
            self._break(
                f"a call needed more than the {self.memory_bytes >> 20} MiB of memory a hook "
                "may hold",
                stopped=True,
            )
        if "ok" in reply:
            out = reply["ok"]
            out["headers"] = [tuple(pair) for pair in out["headers"]]
            out["body"] = base64.b64decode(out["body"])
            return dict(out)
        raise _raised(str(reply.get("type", "HookError")))(str(reply.get("error", "")))

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            if not self._wait(self._out, select.POLLOUT, deadline):
                self._break("a call was not taken", stopped=True)
            try:
                view = view[os.write(self._out, view) :]
            except BlockingIOError:
                continue
            except OSError:
                self._break(self._process_end())

    def _receive(self, deadline: float, late: str) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            if not self._wait(self._in, select.POLLIN, deadline):
                self._break(late, stopped=True)
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                self._break(self._process_end())
            self._buffer += chunk
            if len(self._buffer) > MAX_ANSWER_BYTES:
                self._break(f"an answer held more than {MAX_ANSWER_BYTES >> 20} MiB", stopped=True)
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._break("an answer was not a request", stopped=True)
        return message

    def _wait(self, fd: int, event: int, deadline: float) -> bool:
        poller = select.poll()
        poller.register(fd, event)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if poller.poll(min(left, 0.5) * 1000):
                return True

    def _process_end(self) -> str:
        try:
            status = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            status = None
        return f"its process {_ended(status)} {self._phase}"

    def _break(self, why: str, stopped: bool = False) -> NoReturn:
        self.reason = why + ("; its process was stopped" if stopped else "")
        self.broken = f"the hook {self.spec}: {self.reason}"
        self._held_until = time.monotonic() + HELD_S
        self._kill()
        raise HookStopped(self.broken)

    def _kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def close(self) -> None:
        """Ends the hook's process, and waits (a little) for a call in flight to leave:
        no thread of the engine is left inside Python once the run has returned."""
        self._closed = True
        self._closing.set()
        self._kill()
        end = time.monotonic() + CLOSE_WAIT_S
        while self._in_call.is_set() and time.monotonic() < end:
            time.sleep(0.01)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def check_hook(spec: str) -> None:
    """The hook loads in a process of its own as the run would load it; HookError (its
    message naming the hook and what is wrong) when it does not."""
    HookBox(spec, START_BUDGET_S).close()
