"""Ctrl-C and SIGTERM during a run: the load stops and what it measured is kept.

While `catching()` is active, SIGINT and SIGTERM are counted instead of ending the
process. The load engine's wait loop (`load/engine.py`) reads the count: the first
signal stops sending new requests and waits for those in flight (up to their timeout),
the second abandons them at once. The run then finishes its folder: records, summary,
and for `pinchpoint run` the collection, verdict and report of what ran, all marked
interrupted. A third signal raises KeyboardInterrupt: whatever was not written by then
is left for `pinchpoint analyze` to recover.

The command exits 128 + the first signal's number: 130 for SIGINT, 143 for SIGTERM.

The run can stop itself the same way: `stop(reason)` (an output it can no longer write)
counts as a first signal, and the reason is kept for run.json's `stopped`.

    with catching() as caught:
        outcome = execute(...)
    if caught.signals:
        raise SystemExit(caught.exit_code())
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Signals after which the next one raises KeyboardInterrupt.
SOFT_SIGNALS = 2


@dataclass
class Caught:
    """The signals received while catching, first first, and why the run asked itself to
    stop (`stop()`); `say` prints a line for people."""

    signals: list[int] = field(default_factory=list)
    say: Callable[[str], None] | None = None
    reasons: list[str] = field(default_factory=list)

    def count(self) -> int:
        """The signals, and one more once the run asked itself to stop."""
        return len(self.signals) + (1 if self.reasons else 0)

    def first_name(self) -> str:
        """The first signal's name (SIGINT), else the first reason the run stopped for."""
        if self.signals:
            return signal.Signals(self.signals[0]).name
        return self.reasons[0] if self.reasons else ""

    def exit_code(self) -> int:
        """128 + the first signal's number (130 SIGINT, 143 SIGTERM); 0 without one."""
        return 128 + self.signals[0] if self.signals else 0

    def tell(self, text: str) -> None:
        if self.say is not None:
            self.say(text)


_active: Caught | None = None


def active() -> Caught | None:
    """The signals caught so far by the `catching()` in force, if any."""
    return _active


def count() -> int:
    """How many SIGINT/SIGTERM the `catching()` in force has seen, one more once the run
    asked itself to stop (0 without a `catching()`)."""
    return _active.count() if _active is not None else 0


def stop(reason: str) -> bool:
    """Stops the run in progress as a first signal does, for `reason` (one line, kept in
    run.json's `stopped`); False when no `catching()` is in force to stop."""
    if _active is None:
        return False
    _active.reasons.append(reason)
    return True


@contextmanager
def catching(say: Callable[[str], None] | None = None) -> Iterator[Caught]:
    """Counts SIGINT and SIGTERM for the duration instead of dying of them. Nested, it
    yields the outer one's count. Off the main thread (no handlers can be set there) it
    yields a count that stays at zero."""
    global _active
    if _active is not None:
        if say is not None and _active.say is None:
            _active.say = say
        yield _active
        return
    caught = Caught(say=say)
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        caught.signals.append(signum)
        if len(caught.signals) > SOFT_SIGNALS:
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    _active = caught
    try:
        yield caught
    finally:
        _active = None
        for sig, old in previous.items():
            signal.signal(sig, old)
