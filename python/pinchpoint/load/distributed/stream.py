"""The generators' records, copied to this process while they run.

Each generator's engine appends its requests to an Arrow IPC stream on its own node,
flushed every FLUSH_S. Every PULL_S this process asks each generator for what is new (at
most CHUNK bytes a call, through Ray's object store) and appends it to a local copy, so a
generator lost mid-run loses only what it wrote since its last copy: one chunk. After the
run the rest is copied, and each local stream becomes a Parquet part (a stream cut short
yields its complete batches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinchpoint import _engine

# How often each generator's new records are asked for.
PULL_S = 1.0
# How often the engine flushes its records to the stream (recorder.rs FLUSH_EVERY).
FLUSH_S = 0.25
# The most bytes one call copies, and how long it may take.
CHUNK = 8 << 20
CHUNK_S = 60.0


@dataclass
class Copy:
    """One generator's stream as copied here so far."""

    index: int
    actor: Any
    path: Path
    offset: int = 0
    pending: Any = None
    next_at: float = 0.0
    started_at: float = 0.0
    copied_at: float | None = None
    failed: str | None = None

    def take(self, chunk: bytes) -> None:
        """Appends a copied chunk; a full chunk asks for the next at once."""
        with self.path.open("ab") as f:
            f.write(chunk)
        self.offset += len(chunk)
        now = time.time()
        self.copied_at = now
        self.next_at = now if len(chunk) >= CHUNK else now + PULL_S

    def lost_window_s(self, lost_at: float) -> float:
        """The seconds of records a generator found lost at `lost_at` never sent here:
        from its last copy (or its start) to then, plus the engine's flush period."""
        since = self.copied_at if self.copied_at is not None else self.started_at
        return max(lost_at - since, 0.0) + FLUSH_S


class Streams:
    """The copies of every generator's stream, advanced without blocking by `poll`."""

    def __init__(self, ray: Any, folder: Path, actors: dict[int, Any]) -> None:
        self.ray = ray
        folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.copies = {
            i: Copy(i, actor, folder / f"stream-{i}.arrows", started_at=now, next_at=now)
            for i, actor in actors.items()
        }
        for copy in self.copies.values():
            copy.path.write_bytes(b"")

    def poll(self, live: set[int]) -> None:
        """Takes the chunks that arrived; asks the generators in `live` for more when due."""
        now = time.time()
        for index, copy in self.copies.items():
            if copy.failed is not None:
                continue
            if copy.pending is not None:
                ready, _ = self.ray.wait([copy.pending], timeout=0)
                if not ready:
                    continue
                self._receive(copy)
            if index in live and copy.failed is None and now >= copy.next_at:
                copy.pending = copy.actor.read_stream.remote(copy.offset, CHUNK)

    def drain(self, index: int, size: int) -> None:
        """Copies generator `index`'s stream up to `size` bytes (its final size)."""
        copy = self.copies[index]
        if copy.pending is not None:
            self._receive(copy, CHUNK_S)
        while copy.failed is None and copy.offset < size:
            copy.pending = copy.actor.read_stream.remote(copy.offset, CHUNK)
            if not self._receive(copy, CHUNK_S):
                copy.failed = f"its requests stream ended at {copy.offset} of {size} bytes"
        if copy.failed is not None:
            raise RuntimeError(copy.failed)

    def to_parquet(self, index: int, part: Path) -> int:
        """Generator `index`'s copied records as a Parquet file; its rows (0 when nothing
        complete arrived, and then no file)."""
        copy = self.copies[index]
        try:
            return int(_engine.records_to_parquet(str(copy.path), str(part)))
        except RuntimeError:
            part.unlink(missing_ok=True)
            return 0

    def _receive(self, copy: Copy, timeout: float | None = 0) -> int:
        """Takes the chunk of the call in flight; its size (0 for none or a failure)."""
        ref, copy.pending = copy.pending, None
        try:
            chunk = self.ray.get(ref, timeout=timeout)
        except self.ray.exceptions.RayError as e:
            copy.failed = str(e).splitlines()[0] if str(e) else type(e).__name__
            return 0
        if chunk:
            copy.take(chunk)
        else:
            copy.next_at = time.time() + PULL_S
        return len(chunk)
