"""The timing log: one JSON line per tagged request, safe across threads and processes."""

from __future__ import annotations

import json
import logging
import os
import time

TAG_HEADER = "X-Pinchpoint"
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)

_logger = logging.getLogger(__name__)


def query_has_tag(query: str) -> bool:
    """Whether a raw query string carries the pinchpoint run tag (``pp_run=``)."""
    return any(part.startswith("pp_run=") for part in query.split("&"))


class TimingLog:
    """Appends timing lines to ``path``.

    The file is opened for each line and the line goes out in one ``os.write`` with
    ``O_APPEND``, so lines from threads and forked workers never interleave, and a rotated
    file is picked up.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._warned = False
        # Fail when the middleware is mounted rather than on the first tagged request.
        os.close(os.open(self.path, _FLAGS, 0o644))

    def write(self, method: str, uri: str, status: int, duration_s: float) -> None:
        record = {
            "ts": time.time(),
            "method": method,
            "uri": uri,
            "status": status,
            "duration_s": duration_s,
        }
        data = (json.dumps(record) + "\n").encode()
        try:
            fd = os.open(self.path, _FLAGS, 0o644)
            try:
                while data:
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
        except OSError as exc:
            # A full disk must not fail the user's requests; say so once per process.
            if not self._warned:
                self._warned = True
                _logger.warning("pinchpoint probe: cannot write timing log %s: %s", self.path, exc)
