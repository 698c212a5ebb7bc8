"""What an `[[otlp]]` source received during a run: the spans it keeps, within a count
(the plan's `max_spans`) and a size shared by all the sources of the run (KEPT_BYTES), and
what it refused, counted.

Decoding a payload takes several times its size for a moment, so payloads are decoded one
at a time in the process (`DECODING`): the memory a receiver takes at its peak is the
bodies it holds, one payload decoding and the spans kept.
"""

from __future__ import annotations

import threading
from typing import Any

from pinchpoint.collect.traces.spans import Decoded, Span, span_bytes
from pinchpoint.plan.otlp import Otlp

DECODING = threading.Lock()


class KeptBytes:
    """The bytes the spans of a run's sources may take in memory, taken as they are kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True


class Received:
    """The spans a source gave for the run, and what it refused."""

    def __init__(self, config: Otlp, kept: KeptBytes | None = None) -> None:
        self.config = config
        self.kept = kept if kept is not None else KeptBytes(1 << 62)
        self.spans: list[Span] = []
        self.kept_bytes = 0
        self.payloads = 0
        self.rejected_payloads = 0
        self.rejected_spans = 0
        self.dropped_spans = 0  # past max_spans or the bytes kept
        self.dropped_for_memory = 0
        self.disconnects = 0  # clients gone before their answer: reset, timed out
        self.first_error: str | None = None
        self._lock = threading.Lock()

    def accept(self, decoded: Decoded) -> None:
        with self._lock:
            self.payloads += 1
            self.rejected_spans += decoded.rejected
            for span in decoded.spans:
                if len(self.spans) >= self.config.max_spans:
                    self.dropped_spans += 1
                    continue
                size = span_bytes(span)
                if not self.kept.take(size):
                    self.dropped_spans += 1
                    self.dropped_for_memory += 1
                    continue
                self.kept_bytes += size
                self.spans.append(span)

    def refuse(self, why: str) -> None:
        with self._lock:
            self.rejected_payloads += 1
            self.first_error = self.first_error or why

    def disconnected(self) -> None:
        with self._lock:
            self.disconnects += 1

    def report(self) -> dict[str, Any]:
        return {
            "payloads": self.payloads,
            "rejected_payloads": self.rejected_payloads,
            "spans": len(self.spans),
            "rejected_spans": self.rejected_spans,
            "dropped_spans": self.dropped_spans,
            "kept_bytes": self.kept_bytes,
            "disconnects": self.disconnects,
            **({"first_error": self.first_error} if self.first_error else {}),
        }

    def refusals(self) -> str | None:
        """What this source refused or dropped, as a problem of the run; None if nothing."""
        parts = []
        if self.rejected_payloads:
            parts.append(f"{self.rejected_payloads} payload(s) refused ({self.first_error})")
        if self.rejected_spans:
            parts.append(f"{self.rejected_spans} span(s) without ids or times")
        if self.dropped_spans - self.dropped_for_memory:
            parts.append(
                f"{self.dropped_spans - self.dropped_for_memory} span(s) past max_spans dropped"
            )
        if self.dropped_for_memory:
            mib = self.kept.limit >> 20
            parts.append(
                f"{self.dropped_for_memory} span(s) dropped past the {mib} MiB of memory "
                "kept for spans"
            )
        return f"{self.config.source}: " + "; ".join(parts) if parts else None

    def start(self) -> None:
        """Begins taking spans for the run."""

    def read(self) -> None:
        """Ends taking spans: what the source holds is in `spans`."""

    def close(self) -> None:
        """Frees what the source holds open; idempotent."""
