"""The run's samplers from inside: one per component with a `[component.database]`
(PostgreSQL, MySQL) or a `[component.redis]`, and what they sampled written into the run
folder: db_activity.parquet, and db_statements.parquet where pg_stat_statements (MySQL:
performance_schema's statement digests) could be read; redis_info, redis_commands and
redis_slowlog.parquet for the Redis servers."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from pinchpoint.collect.database.mysql_sampler import MysqlSampler
from pinchpoint.collect.database.sampler import DatabaseSampler
from pinchpoint.collect.redis.sampler import RedisSampler
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files
from pinchpoint.rundir.redis_schemas import (
    REDIS_COMMANDS_SCHEMA,
    REDIS_INFO_SCHEMA,
    REDIS_SLOWLOG_SCHEMA,
)
from pinchpoint.rundir.schemas import DB_ACTIVITY_SCHEMA, DB_STATEMENTS_SCHEMA


class Sampler(Protocol):
    problems: list[str]

    def start(self) -> None: ...

    def stop(self) -> None: ...


class DatabaseSampling:
    """Starts, stops and writes the samplers of a plan's database and Redis components."""

    def __init__(
        self, samplers: list[DatabaseSampler], redis: list[RedisSampler] | None = None
    ) -> None:
        self.samplers = samplers
        self.redis = redis or []

    @classmethod
    def for_plan(cls, plan: Plan) -> DatabaseSampling | None:
        """The plan's samplers; None when no component is sampled from inside."""
        samplers = [
            (MysqlSampler if c.database.kind == "mysql" else DatabaseSampler)(c.name, c.database)
            for c in plan.component
            if c.database is not None
        ]
        redis = [RedisSampler(c.name, c.redis) for c in plan.component if c.redis is not None]
        return cls(samplers, redis) if samplers or redis else None

    def _all(self) -> list[Sampler]:
        return [*self.samplers, *self.redis]

    @property
    def problems(self) -> list[str]:
        return [p for s in self._all() for p in s.problems]

    def start(self) -> None:
        for sampler in self._all():
            sampler.start()

    def stop(self) -> None:
        for sampler in self._all():
            sampler.stop()

    def write(self, folder: files.RunFolder) -> None:
        """db_activity.parquet (even empty: the run asked for it), and db_statements.parquet
        when some server's pg_stat_statements (or performance_schema's digests) was read;
        the Redis tables (even empty) when the plan has a Redis component."""
        if self.samplers:
            rows = [row for s in self.samplers for row in list(s.rows)]
            _write(folder, files.DB_ACTIVITY, rows, DB_ACTIVITY_SCHEMA)
        if any(s.statements_source not in (None, "samples") for s in self.samplers):
            found = [row for s in self.samplers for row in list(s.statements)]
            _write(folder, files.DB_STATEMENTS, found, DB_STATEMENTS_SCHEMA)
        if self.redis:
            info = [row for s in self.redis for row in list(s.info)]
            _write(folder, files.REDIS_INFO, info, REDIS_INFO_SCHEMA)
            commands = [row for s in self.redis for row in list(s.commands)]
            _write(folder, files.REDIS_COMMANDS, commands, REDIS_COMMANDS_SCHEMA)
            slow = [row for s in self.redis for row in list(s.slowlog)]
            _write(folder, files.REDIS_SLOWLOG, slow, REDIS_SLOWLOG_SCHEMA)


def _write(
    folder: files.RunFolder, name: str, rows: list[dict[str, Any]], schema: pa.Schema
) -> None:
    columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), folder / name)
