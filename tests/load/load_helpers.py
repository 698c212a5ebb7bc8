"""A local HTTP/1.1 server for the engine to load, and plans pointing at it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pinchpoint.plan.model import Plan, parse_plan
from pinchpoint_lab.serving import Quiet, serving

BODY = b"hello from the load tests\n"


@dataclass
class Seen:
    """What the server received."""

    paths: list[str] = field(default_factory=list)
    tags: list[str | None] = field(default_factory=list)
    # (traceparent, baggage) of each request.
    traces: list[tuple[str | None, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self) -> int:
        with self.lock:
            return len(self.paths)


class _Handler(Quiet):
    seen: Seen

    def do_GET(self) -> None:
        with self.seen.lock:
            self.seen.paths.append(self.path)
            self.seen.tags.append(self.headers.get("X-Pinchpoint"))
            self.seen.traces.append((self.headers.get("traceparent"), self.headers.get("baggage")))
        self.answer(200, BODY, "text/plain")


@contextmanager
def http_server() -> Iterator[tuple[int, Seen]]:
    """A ThreadingHTTPServer on 127.0.0.1 in a thread; yields its port and what it saw."""
    seen = Seen()
    handler = type("Handler", (_Handler,), {"seen": seen})
    with serving(handler) as port:
        yield port, seen


def dead_port() -> int:
    """A port on 127.0.0.1 with nothing listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_plan(
    port: int,
    *,
    lower: int = 1,
    upper: int = 2,
    duration: str = "1s",
    think_time: str = "0s",
    timeout: str = "2s",
    path: str = "/hello",
) -> Plan:
    return parse_plan(
        f"""
[target]
url = "http://127.0.0.1:{port}"

[load]
lower = {lower}
upper = {upper}
duration = "{duration}"
warmup = "0s"
think_time = "{think_time}"
timeout = "{timeout}"
threads = 2

[[request]]
path = "{path}"
"""
    )
