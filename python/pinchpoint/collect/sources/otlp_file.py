"""An `[[otlp]]` file: the OTLP/JSON lines an OpenTelemetry Collector's file exporter
added to it during the run, read after the run from where it ended when the run started.

Only a regular file is read: the plan refuses a FIFO or a device (plan/otlp.py), and a
path that became one since is refused here, opened without blocking, never read. The
file is read up to the size it had when it was opened, one line at a time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pinchpoint.collect.sources.otlp_received import DECODING, KeptBytes, Received
from pinchpoint.collect.traces.otlp_json import decode_json
from pinchpoint.collect.traces.spans import PayloadError
from pinchpoint.plan.otlp import Otlp
from pinchpoint.plan.user_paths import not_regular

MAX_LINE = 32 << 20  # bytes of one line: one export request


class FileSource(Received):
    """One `[[otlp]]` file: the lines its writer added during the run, read after it."""

    def __init__(self, config: Otlp, kept: KeptBytes | None = None) -> None:
        super().__init__(config, kept)
        self.path = Path(config.file or "")
        self._mark: tuple[int, int] | None = None  # (inode, size) when the run started

    def start(self) -> None:
        try:
            found = self.path.stat()
        except OSError:
            return  # not written yet: all of it will be the run's
        if stat.S_ISREG(found.st_mode):
            self._mark = (found.st_ino, found.st_size)

    def read(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            self.refuse(f"cannot read {self.path}: {exc.strerror or exc}")
            return
        with os.fdopen(fd, "rb") as handle:
            found = os.fstat(fd)
            kind = not_regular(found.st_mode)
            if kind is not None:
                self.refuse(f"{self.path} is {kind}, not a regular file: not read")
                return
            mark = self._mark
            if mark is not None and mark[0] == found.st_ino and found.st_size >= mark[1]:
                handle.seek(mark[1])
            left = found.st_size - handle.tell()
            number = 0
            while left > 0 and (line := handle.readline(min(MAX_LINE + 1, left))):
                left -= len(line)
                number += 1
                if len(line) > MAX_LINE:
                    self.refuse(f"{self.path}: line {number} is over {MAX_LINE} bytes")
                    while left > 0 and line and not line.endswith(b"\n"):
                        line = handle.readline(min(MAX_LINE, left))
                        left -= len(line)
                    continue
                if line.strip():
                    self._line(line, number)

    def _line(self, line: bytes, number: int) -> None:
        try:
            with DECODING:
                decoded = decode_json(line)
        except PayloadError as exc:
            self.refuse(f"{self.path}: line {number}: {exc}")
        except (MemoryError, Exception) as exc:  # never a traceback for what a file holds
            self.refuse(f"{self.path}: line {number}: not read ({type(exc).__name__})")
        else:
            self.accept(decoded)
