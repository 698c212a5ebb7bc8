"""`--metrics-push URL`: the series `--metrics` serves, pushed by Prometheus remote write
(protobuf `WriteRequest`, snappy-compressed, version 0.1.0) each second while the run
goes and once more at its end, so that no scrape has to catch the run.

The tick only tallies the snapshot and wakes a thread of its own, which pushes the tally
as it stands: a receiver that is slow or down delays nothing of the run. The counters are
cumulative, so a push that waits while the one before it is still going carries the newer
values, and none is queued behind another. Each push has a timeout; a push that fails is
counted and said once, and the run goes on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from pinchpoint import _engine
from pinchpoint.outputs.openmetrics import Tally

PUSH_TIMEOUT_S = 5.0
HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": "pinchpoint",
}


def check_push_url(url: str) -> str:
    """The URL when it is an http(s) URL with a host; else ValueError saying why."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "expected an http:// or https:// URL, such as http://HOST:9090/api/v1/write"
        )
    return url


def parse_header(header: str) -> tuple[str, str]:
    """`Name: value` as (name, value); ValueError when it has no name or no colon."""
    name, sep, value = header.partition(":")
    if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
        raise ValueError(f"{header.split(':', 1)[0]!r}: expected NAME: VALUE")
    return name.strip(), value.strip()


@dataclass
class PushCounts:
    """The pushes made, those that failed, and why the last one failed."""

    pushed: int = 0
    failed: int = 0
    last_error: str | None = None

    def summary(self, url: str) -> str | None:
        """A line when some pushes failed, None when all went through."""
        if not self.failed:
            return None
        return (
            f"--metrics-push {url}: {self.failed} of {self.pushed + self.failed} pushes failed "
            f"(last: {self.last_error}); the run's series there miss those seconds' values"
        )


class MetricsPush:
    """Feeds a tally with each tick and pushes it from a thread of its own."""

    def __init__(
        self,
        url: str,
        run_id: str,
        requests: list[str] | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = PUSH_TIMEOUT_S,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.url = check_push_url(url)
        self.tally = Tally(run_id, requests=requests)
        self.counts = PushCounts()
        self.say = say
        self.timeout_s = timeout_s
        self.client = httpx.Client(timeout=timeout_s, headers={**HEADERS, **(headers or {})})
        self.wake = threading.Event()
        self.lock = threading.Lock()
        self.closing = False
        # The tick's time of the tally not pushed yet (None: nothing new since the last).
        self.fresh_at: float | None = None
        self.last_ms = 0
        self.thread = threading.Thread(target=self._pushing, name="metrics-push", daemon=True)
        self.thread.start()

    def __call__(self, snapshot: dict[str, Any]) -> None:
        self.tally(snapshot)
        with self.lock:
            self.fresh_at = float(snapshot.get("taken_at", time.time()))
        self.wake.set()

    def _pushing(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            closing = self.closing
            with self.lock:
                taken_at, self.fresh_at = self.fresh_at, None
            if taken_at is not None:
                self.push(taken_at)
            if closing:
                return

    def push(self, taken_at: float) -> None:
        """One request with every series of the tally, at `taken_at` (later than the last
        push's time, which a receiver requires of a series' samples)."""
        at_ms = max(int(taken_at * 1000), self.last_ms + 1)
        self.last_ms = at_ms
        body = _engine.remote_write_body(self.series(), at_ms)
        try:
            answer = self.client.post(self.url, content=body)
            error = None if answer.is_success else f"HTTP {answer.status_code} {_said(answer.text)}"
        except httpx.HTTPError as e:
            error = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        if error is None:
            self.counts.pushed += 1
            return
        self.counts.failed += 1
        self.counts.last_error = error
        if self.counts.failed == 1 and self.say is not None:
            self.say(f"--metrics-push {self.url}: a push failed ({error}); the run goes on")

    def series(self) -> list[tuple[list[tuple[str, str]], float]]:
        """Each sample of the tally as (labels with `__name__`, value)."""
        return [
            ([("__name__", name), *labels.items()], float(value))
            for family in self.tally.families()
            for name, labels, value in family.samples
        ]

    def close(self) -> None:
        """The last push (the run's end) and the thread ended: within two pushes' timeouts,
        the one going on and the last."""
        self.closing = True
        self.wake.set()
        self.thread.join(timeout=2 * self.timeout_s + 1.0)
        self.client.close()


def _said(text: str) -> str:
    """A receiver's answer, short and on one line."""
    line = " ".join(text.split())
    return line[:200] + ("…" if len(line) > 200 else "")


@contextmanager
def pushing(push: MetricsPush | None, say: Callable[[str], None]) -> Iterator[None]:
    """The push while the block goes; then its last push, and a line said when some of
    its pushes failed."""
    try:
        yield
    finally:
        if push is not None:
            push.close()
            line = push.counts.summary(push.url)
            if line is not None:
                say(line)
