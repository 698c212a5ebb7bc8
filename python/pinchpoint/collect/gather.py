"""What every collector offers, and writing what they collected into the run folder.

A collector covers some components: LocalCollector those on this host, RemoteCollector
those behind one agent; PrometheusCollector reads series of a Prometheus server after the
run and lays them over the others' rows (an Overlay). The pipeline starts and stops them
all around the load, then writes resources.parquet, tiers.parquet and collection.json
from what they give.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pinchpoint.collect.logs.reader import FileCounts, TierBatch, TierRow, collection_json
from pinchpoint.collect.resources.sampler import conform
from pinchpoint.lifecycle import Closing
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA, TIERS_SCHEMA
from pinchpoint.rundir.shapes import CollectionJson

_ZERO = {"lines": 0, "matched": 0, "other_run": 0, "untagged": 0, "unparseable": 0}


class Collector(Protocol):
    """Collection for a set of components. Only start() of a local collector may raise."""

    name: str | None  # the agent's name; None on this host
    problems: list[str]

    def start(self, run_id: str, interval_s: float) -> None: ...

    def stop(self) -> None: ...

    def resources(self) -> pa.Table: ...

    def collect_logs(self, sink: Callable[[TierBatch], None]) -> list[FileCounts]: ...

    def report(self) -> dict[str, Any] | None: ...

    def log_marks(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


@runtime_checkable
class Overlay(Protocol):
    """A collector whose rows go over the others' instead of beside them."""

    def overlay(self, table: pa.Table) -> pa.Table: ...


class TierWriter(Closing):
    """Writes tiers.parquet in row groups of about `group_rows` rows, so rows are never
    all held in memory.

    `req_id_offsets` maps a level's users to what its requests' ids were shifted by in
    requests.parquet (a knee search numbers each probe's requests from 0); a record's id
    is shifted by its tag's users alike, so the two files join by request id."""

    def __init__(
        self,
        path: Path,
        group_rows: int = 65536,
        req_id_offsets: Mapping[int, int] | None = None,
    ) -> None:
        self._writer = pq.ParquetWriter(path, TIERS_SCHEMA)
        self._group_rows = group_rows
        self._offsets = {u: o for u, o in (req_id_offsets or {}).items() if o}
        # Rows not written yet, in the order they came: TierRows, or tables of columns.
        self._pending: list[TierRow] = []
        self._tables: list[pa.Table] = []
        self._table_rows = 0
        self.rows = 0

    def add(self, rows: Sequence[TierRow] | pa.Table | pa.RecordBatch) -> None:
        """Rows, or a table or record batch of tiers.parquet's columns (written as they
        are, their ids shifted as rows' are)."""
        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if isinstance(rows, pa.Table):
            if rows.num_rows == 0:
                return
            self._flush_rows()
            self.rows += rows.num_rows
            self._tables.append(rows)
            self._table_rows += rows.num_rows
            if self._table_rows >= self._group_rows:
                self._flush_tables()
            return
        self._flush_tables()
        self._pending.extend(rows)
        self.rows += len(rows)
        if len(self._pending) >= self._group_rows:
            self._flush_rows()

    def _shifted(self, table: pa.Table) -> pa.Table:
        if not self._offsets:
            return table
        users = table.column("users").to_numpy()
        shift = np.zeros(len(users), dtype=np.uint64)
        for level, offset in self._offsets.items():
            shift[users == level] = offset
        ids = pc.add(table.column("req_id"), pa.array(shift))
        return table.set_column(table.schema.get_field_index("req_id"), "req_id", ids)

    def close(self) -> None:
        if self.rows == 0:
            self._writer.write_table(TIERS_SCHEMA.empty_table())
        self._flush_rows()
        self._flush_tables()
        self._writer.close()

    def _flush_tables(self) -> None:
        if not self._tables:
            return
        table = pa.concat_tables(self._tables)
        self._writer.write_table(self._shifted(table), row_group_size=table.num_rows)
        self._tables = []
        self._table_rows = 0

    def _flush_rows(self) -> None:
        if not self._pending:
            return
        columns: dict[str, list[Any]] = {name: [] for name in TIERS_SCHEMA.names}
        for row in self._pending:
            for name, values in columns.items():
                values.append(getattr(row, name))
        self._writer.write_table(self._shifted(pa.Table.from_pydict(columns, schema=TIERS_SCHEMA)))
        self._pending = []


def write_resources(collectors: Sequence[Collector], path: Path) -> None:
    """resources.parquet from the samples of every collector, overlays last."""
    tables = [conform(c.resources()) for c in collectors if not isinstance(c, Overlay)]
    table = pa.concat_tables(tables) if tables else RESOURCES_SCHEMA.empty_table()
    for collector in collectors:
        if isinstance(collector, Overlay):
            table = conform(collector.overlay(table))
    pq.write_table(table, path)


def write_logs(
    collectors: Sequence[Collector],
    run_id: str,
    run_dir: Path,
    components: Sequence[str],
    req_id_offsets: Mapping[int, int] | None = None,
    redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """tiers.parquet and collection.json from every collector; returns collection.json,
    its texts passed through `redact` (the plan's secrets and URLs' credentials out).

    Components of an agent are marked with its name, and those it could not give with an
    `error`; those a collector warns about (no process found, a log with no file) get
    `warnings`, and the log with no file is a problem of its collector; any of
    `components` (those with a log, or on an agent) that no collector gave counts for is
    listed with zero counts and an error.
    """
    counts: list[FileCounts] = []
    with TierWriter(run_dir / files.TIERS, req_id_offsets=req_id_offsets) as writer:
        for collector in collectors:
            found = collector.collect_logs(writer.add)
            # A log with no file is a problem of its collector, on the terminal too.
            on = f"agent {collector.name}: " if collector.name is not None else ""
            collector.problems.extend(f"{on}{w}" for c in found if (w := c.warning()))
            counts.extend(found)
    collected = collection_json(run_id, counts)
    entries = collected["components"]
    agents = {c.name: c.report() or {} for c in collectors if c.name is not None}
    if agents:
        collected["agents"] = agents
    # Sections of collectors that are not agents (prometheus), the warnings of this host's.
    for collector in collectors:
        if collector.name is None and (section := collector.report()):
            for name, warnings in section.pop("component_warnings", {}).items():
                entries.setdefault(name, _empty()).setdefault("warnings", []).extend(warnings)
            collected.update(section)
    for agent_name, report in agents.items():
        for name in report.get("components", []):
            entries.setdefault(name, _empty())["agent"] = agent_name
        for name, error in report.get("component_errors", {}).items():
            entries.setdefault(name, _empty())["error"] = error
    for name in components:
        if name not in entries:
            entries[name] = {**_empty(), "error": "not collected"}
    if redact is not None:
        collected = redact(collected)
    files.RunFolder(run_dir).write_collection(cast(CollectionJson, collected))
    return collected


def _empty() -> dict[str, Any]:
    return {**_ZERO, "files": {}}
