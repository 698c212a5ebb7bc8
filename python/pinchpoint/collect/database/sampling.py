"""The run's database samplers, one per component with a `[component.database]`, and what
they sampled written into the run folder: db_activity.parquet, and db_statements.parquet
where pg_stat_statements (MySQL: performance_schema's statement digests) could be read."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.collect.database.mysql_sampler import MysqlSampler
from pinchpoint.collect.database.sampler import DatabaseSampler
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files
from pinchpoint.rundir.schemas import DB_ACTIVITY_SCHEMA, DB_STATEMENTS_SCHEMA


class DatabaseSampling:
    """Starts, stops and writes the samplers of a plan's database components."""

    def __init__(self, samplers: list[DatabaseSampler]) -> None:
        self.samplers = samplers

    @classmethod
    def for_plan(cls, plan: Plan) -> DatabaseSampling | None:
        """The plan's samplers; None when no component has a [component.database]."""
        samplers = [
            (MysqlSampler if c.database.kind == "mysql" else DatabaseSampler)(c.name, c.database)
            for c in plan.component
            if c.database is not None
        ]
        return cls(samplers) if samplers else None

    @property
    def problems(self) -> list[str]:
        return [p for s in self.samplers for p in s.problems]

    def start(self) -> None:
        for sampler in self.samplers:
            sampler.start()

    def stop(self) -> None:
        for sampler in self.samplers:
            sampler.stop()

    def write(self, folder: files.RunFolder) -> None:
        """db_activity.parquet (even empty: the run asked for it), and db_statements.parquet
        when some server's pg_stat_statements (or performance_schema's digests) was read."""
        rows = [row for s in self.samplers for row in list(s.rows)]
        _write(folder, files.DB_ACTIVITY, rows, DB_ACTIVITY_SCHEMA)
        if any(s.statements_source not in (None, "samples") for s in self.samplers):
            found = [row for s in self.samplers for row in list(s.statements)]
            _write(folder, files.DB_STATEMENTS, found, DB_STATEMENTS_SCHEMA)


def _write(
    folder: files.RunFolder, name: str, rows: list[dict[str, Any]], schema: pa.Schema
) -> None:
    columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), folder / name)
