"""A server sampled from inside while the load runs, in a thread of its own: `rate`
samples a second over one connection, a slower read about once a second, at most
MAX_ROWS rows, and a last read when the run ends.

It never blocks the run: the thread connects on its own, a failure drops the connection
and waits RETRY_S before the next attempt, the first failures become problems the run
reports as warnings, and stopping waits JOIN_S at most. A server's sampler says how to
connect, what one sample and the slower read are, and how many rows it keeps.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

# The most rows a sampler keeps (a long run with many backends).
MAX_ROWS = 1_000_000
# After a failure, the next attempt to connect waits this long.
RETRY_S = 2.0
# How often the slower read (statements, the slow log) is made.
SLOW_EVERY_S = 1.0
# Failures beyond this many are counted but not reported again.
REPORTED_FAILURES = 3


class SamplerThread:
    """The thread, its bounds and its problems; subclasses say what a sample is."""

    # The server's kind, first in each problem ("database web-db: ...").
    kind = "server"
    # How long stopping waits for the thread to end.
    join_s = 2.0

    def __init__(self, component: str, rate: float) -> None:
        self.component = component
        self.rate = rate
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._failures = 0

    def _start(self, address: str) -> None:
        self._thread = threading.Thread(
            target=self._run,
            args=(address,),
            name=f"pinchpoint-{self.kind}-{self.component}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stops sampling; waits for the thread `join_s` at most."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.join_s)
            if self._thread.is_alive():
                self._problem("the sampler did not stop in time; its last sample is left out")

    def _problem(self, text: str) -> None:
        self.problems.append(f"{self.kind} {self.component}: {text}")

    def _run(self, address: str) -> None:
        period = 1.0 / self.rate
        next_slow = 0.0
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                if self._connected(address):
                    self._sample()
                    if began >= next_slow and self._conn is not None and self._slow_read_on():
                        self._slow_read()
                        next_slow = began + SLOW_EVERY_S
                if self._kept() >= MAX_ROWS:
                    self._problem(f"sampling stopped at {MAX_ROWS} rows")
                    break
                self._stop.wait(max(0.0, period - (time.monotonic() - began)))
            if self._conn is not None:
                self._last_read()
        finally:
            self._close()

    def _failed(self, text: str) -> None:
        """Records the first failures, drops the connection and waits before the next."""
        self._failures += 1
        if self._failures <= REPORTED_FAILURES:
            self._problem(text)
        self._close()
        self._stop.wait(RETRY_S)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # Closing a broken connection: nothing is left to do when it fails.
            with contextlib.suppress(Exception):
                conn.close()

    def _connected(self, address: str) -> bool:
        """Whether a connection is open, making one (or failing) when there is none."""
        raise NotImplementedError

    def _sample(self) -> None:
        raise NotImplementedError

    def _slow_read_on(self) -> bool:
        """Whether the server offers the slower read (a sampler may learn it on connecting)."""
        return True

    def _slow_read(self) -> None:
        raise NotImplementedError

    def _kept(self) -> int:
        """The rows kept so far, held to MAX_ROWS."""
        raise NotImplementedError

    def _last_read(self) -> None:
        """What is read once more when the run ends, the connection still open."""
        if self._slow_read_on():
            self._slow_read()
