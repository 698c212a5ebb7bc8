"""Spans received over OTLP during a run, as a collector of tier records.

`pinchpoint run` listens where each `[[otlp]]` table says (otlp_http.py), from the load's
start to `settle` after its end (SDKs export in batches), or reads the lines a Collector's
file exporter added to a file (otlp_file.py). A body that is not an export request is
answered 400 and counted, never raised; a span without what a record needs is counted as
unparseable. The spans of the run's traces become tier records (`collect/traces/tiers.py`)
written into tiers.parquet with the logs' records, and the calls they show between tiers
go into collection.json (`calls`).

Memory, at most: the bodies held at once (otlp_http.BODIES_BYTES, 64 MiB), one payload
decoding (its body, decompressed, up to 32 MiB, and the objects of at most a million JSON
values, about 70 MB), and the spans kept by all the run's sources (KEPT_BYTES, 256 MiB,
about 1 KB a span with a few short attributes; past it spans are dropped and counted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from pinchpoint.collect.logs.reader import FileCounts, TierBatch
from pinchpoint.collect.sources.otlp_file import FileSource
from pinchpoint.collect.sources.otlp_http import MAX_BODY, MAX_CONNECTIONS, Receiver
from pinchpoint.collect.sources.otlp_received import KeptBytes, Received
from pinchpoint.collect.traces.tiers import tiers_of
from pinchpoint.plan.otlp import Otlp
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

__all__ = ["MAX_BODY", "MAX_CONNECTIONS", "FileSource", "OtlpCollector", "Received", "Receiver"]
KEPT_BYTES = 256 << 20  # of the spans kept by all the sources of a run


class OtlpCollector:
    """The plan's `[[otlp]]` sources as a collector of this host (no resources)."""

    name: str | None = None

    def __init__(self, configs: Sequence[Otlp]) -> None:
        self.configs = list(configs)
        self.problems: list[str] = []
        self.receivers: list[Received] = []
        self.run_id: str | None = None
        self._stopped_at: float | None = None
        self._calls: dict[str, list[str]] = {}

    def start(self, run_id: str, interval_s: float) -> None:
        self.run_id = run_id
        kept = KeptBytes(KEPT_BYTES)
        for config in self.configs:
            try:
                source: Received
                if config.file is not None:
                    source = FileSource(config, kept)
                else:
                    source = Receiver(config, kept)
            except OSError as exc:
                self.close()
                why = exc.strerror or exc
                raise OSError(f"otlp: cannot listen on {config.listen}: {why}") from None
            source.start()
            self.receivers.append(source)

    def stop(self) -> None:
        self._stopped_at = time.monotonic()

    def resources(self) -> pa.Table:
        return RESOURCES_SCHEMA.empty_table()

    def collect_logs(self, sink: Callable[[TierBatch], None]) -> list[FileCounts]:
        if self.run_id is None:
            return []
        settle = max((c.settle for c in self.configs), default=0.0)
        if self._stopped_at is not None:
            time.sleep(max(self._stopped_at + settle - time.monotonic(), 0.0))
        counts: list[FileCounts] = []
        calls: dict[str, set[str]] = {}
        for source in self.receivers:
            source.read()
            found = tiers_of(source.spans, self.run_id)
            sink(found.rows)
            counts += [
                FileCounts(
                    component=component,
                    path=source.config.source,
                    lines=c.spans,
                    matched=c.matched,
                    other_run=c.other_run,
                    untagged=c.untagged,
                    unparseable=c.unparseable,
                )
                for component, c in sorted(found.counts.items())
            ]
            for caller, callees in found.calls.items():
                calls.setdefault(caller, set()).update(callees)
            refusals = source.refusals()
            if refusals is not None:
                self.problems.append(refusals)
            if source.payloads == 0:
                self.problems.append(f"{source.config.source}: no spans received")
        self._calls = {caller: sorted(callees) for caller, callees in sorted(calls.items())}
        return counts

    def report(self) -> dict[str, Any]:
        if not self.receivers:
            return {}
        return {
            "otlp": {r.config.source: r.report() for r in self.receivers},
            "calls": self._calls,
        }

    def log_marks(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        for source in self.receivers:
            source.close()
