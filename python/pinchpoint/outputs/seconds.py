"""`--out FILE.jsonl`: one JSON object per second of the run, for tools of one's own (as
k6's JSON output). Each line is that second alone: its requests and errors (by class),
its throughput, the percentiles of its responses' latencies (from the second's
histogram), the step and its load, and `kinds`: the records and errors of each kind in
the second (`request`, `ws_session`, `ws_message`, `grpc_call`, `grpc_message`: a gRPC
run's failed calls apart from its streamed messages). A second that straddles two steps
is two lines, one per step, each counting the requests sent in its step (`seconds`: how
much of the second that step ran), so that the lines of a step add up to its requests.
The file is appended and flushed each second, so it can be followed (`tail -f`) while
the run goes."""

from __future__ import annotations

import json
import time
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

from pinchpoint.load import interrupts
from pinchpoint.load.hdr import Histogram, decode_v2

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)


class SecondsFile:
    """Writes each snapshot's second as one line of `path`."""

    def __init__(self, path: Path, run_id: str) -> None:
        self.path = path
        self.run_id = run_id
        self.file: IO[str] = path.open("a", encoding="utf-8")
        self.last: dict[str, Any] = {}
        self.last_at: float | None = None
        self.lines = 0
        # Why the file stopped being written, once a write failed.
        self.failed: str | None = None

    def __call__(self, snapshot: dict[str, Any]) -> None:
        self.write(snapshot, float(snapshot.get("taken_at", time.time())))

    def write(self, snapshot: dict[str, Any], now: float) -> None:
        """One line; a write that fails (a full disk) stops the file and the run, which
        ends as at a first Ctrl-C and says why (interrupts.stop)."""
        if self.failed is not None:
            return
        try:
            self.file.write(json.dumps(self.line(snapshot, now), separators=(",", ":")) + "\n")
            self.file.flush()
        except OSError as e:
            self.failed = (
                f"{self.path} could not be written ({e.strerror or e}) after {self.lines} lines"
            )
            interrupts.stop(self.failed)
            return
        self.lines += 1

    def line(self, snapshot: dict[str, Any], now: float) -> dict[str, Any]:
        """The second since the previous snapshot, as one JSON object."""
        seconds = now - self.last_at if self.last_at is not None else 1.0
        if "seconds" in snapshot:  # a part of the second: one step's share of it
            seconds = float(snapshot["seconds"])
        requests = snapshot.get("requests", 0) - self.last.get("requests", 0)
        errors = snapshot.get("errors", 0) - self.last.get("errors", 0)
        classes = snapshot.get("errors_by_class") or {}
        before = self.last.get("errors_by_class") or {}
        out: dict[str, Any] = {
            "time": round(now, 3),
            "run_id": self.run_id,
            "step": int(snapshot.get("step", 0)),
            "kind": snapshot.get("kind", "users"),
            "level": snapshot.get("level", 0.0),
            "users": snapshot.get("users", 0),
            "requests": requests,
            "errors": errors,
            "errors_by_class": {
                name: n - before.get(name, 0)
                for name, n in sorted(classes.items())
                if n - before.get(name, 0)
            },
            "kinds": kinds_since(snapshot.get("by_kind") or {}, self.last.get("by_kind") or {}),
            "seconds": round(seconds, 3),
            "rps": round(requests / seconds, 3) if seconds > 0 else None,
            "latency_ms": _percentiles(snapshot),
        }
        self.last = {
            k: snapshot.get(k) for k in ("requests", "errors", "errors_by_class", "by_kind")
        }
        self.last_at = now
        return out

    def close(self) -> None:
        # After a failed write the buffer still holds the line: flushing it fails again.
        with suppress(OSError):
            self.file.close()


def kinds_since(now: dict[str, Any], before: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The records and errors of each kind in the second: the counts so far less those of
    the previous line; kinds with no record in it are left out."""
    out = {}
    for kind, counts in sorted(now.items()):
        was = before.get(kind) or {}
        requests = int(counts["requests"]) - int(was.get("requests", 0))
        if requests:
            errors = int(counts["errors"]) - int(was.get("errors", 0))
            out[kind] = {"requests": requests, "errors": errors}
    return out


def _percentiles(snapshot: dict[str, Any]) -> dict[str, float]:
    """The second's latency percentiles in ms: from its histogram when the snapshot has
    one, else the p50 and p99 it carries."""
    data = snapshot.get("window_hdr_v2")
    if data:
        counts = decode_v2(bytes(data))
        total = int(counts.sum())
        if not total:
            return {}
        window = Histogram(counts, total, 0, 0)
        out = {f"p{q:g}": window.value_at_quantile(q / 100) / 1000 for q in PERCENTILES}
        out["max"] = window.value_at_quantile(1.0) / 1000
        return out
    return {
        name: snapshot[key] / 1000
        for name, key in (("p50", "window_p50_us"), ("p99", "window_p99_us"))
        if key in snapshot
    }
