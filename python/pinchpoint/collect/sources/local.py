"""Collection on this host: log marks, resource sampling and tagged records of components.

The same class serves `pinchpoint run` for the plan's local components and the agent for
the components of its config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from pinchpoint.collect.logs.fastlogs import match_file, match_file_batches
from pinchpoint.collect.logs.logset import LogMark, Source, log_sources, mark_logs
from pinchpoint.collect.logs.reader import FileCounts, TierBatch, TierRow, match_lines, read_from
from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.logformats import LineParser, get_parser
from pinchpoint.logformats.tag import check_run_id
from pinchpoint.plan.model import Component
from pinchpoint.rundir.schemas import RESOURCES_SCHEMA

# How many lines are read between two calls of a log reader's `tick`.
TICK_LINES = 4096
BATCH_ROWS = 8192


class LocalCollector:
    """Collects the given components on this host for one run at a time.

    start() marks every log and starts sampling; stop() stops sampling; then resources()
    and collect_logs() give what was collected. `problems` lists what went wrong, and
    `name` is None: these components need no agent.
    """

    name: str | None = None

    def __init__(self, components: Sequence[Component], server_files: bool = True) -> None:
        self.components = {c.name: c for c in components}
        # Whether the servers' config files and environments may be read for their pools:
        # not by the agent, which reads only the files its config names.
        self._server_files = server_files
        # Compiled up front: a log format that does not compile fails before any load.
        for c in components:
            if c.log is not None:
                get_parser(c.log.format, c.log.log_format)
        self._targets = {
            c.name: ProcessSelector.from_dict(c.process.model_dump(exclude_defaults=True))
            for c in components
            if c.process is not None
        }
        self.run_id: str | None = None
        self.marks: dict[str, LogMark] = {}
        self.problems: list[str] = []
        # Per component: what it lacked (a process selector that found no process).
        self.component_warnings: dict[str, list[str]] = {}
        self._sampler: ResourceSampler | None = None
        self._stopped = False

    def start(self, run_id: str, interval_s: float) -> None:
        """Marks the end of every log, then starts sampling every `interval_s` seconds."""
        sampler = ResourceSampler(
            self._targets, interval_s=interval_s, server_files=self._server_files
        )
        self.run_id = check_run_id(run_id)
        self.marks = {
            name: mark_logs(c.log.path) for name, c in self.components.items() if c.log is not None
        }
        self._sampler = sampler
        self._stopped = False
        sampler.start()

    def read_whole_logs(self, run_id: str) -> None:
        """Collects `run_id`'s records from the whole of each log, with no mark and no
        sampling: a killed run's, whose marks were lost with it. Lines of other runs are
        counted and left, as ever, by their tag."""
        self.run_id = check_run_id(run_id)
        self.marks = {}

    def stop(self) -> None:
        """Stops sampling (idempotent); an error that stopped it early, and each process
        selector that found no process, become problems."""
        sampler = self._sampler
        if sampler is None or self._stopped:
            return
        self._stopped = True
        try:
            sampler.stop(raise_errors=True)
        except RuntimeError as e:
            self.problems.append(str(e))
        for name, warning in sampler.warnings().items():
            self.component_warnings.setdefault(name, []).append(warning)
            self.problems.append(warning)

    def resources(self) -> pa.Table:
        """The samples: the components', the host's and this process's (`generator`)."""
        if self._sampler is None:
            return RESOURCES_SCHEMA.empty_table()
        return self._sampler.table()

    def component_rows(
        self,
        name: str,
        counts_out: list[FileCounts],
        tick: Callable[[], None] | None = None,
    ) -> Iterator[TierRow]:
        """The run's records in the log of component `name`, one at a time.

        Each file read adds its FileCounts to `counts_out` (complete once the iterator is
        exhausted); `tick` is called every TICK_LINES lines read, matched or not.
        """
        for source, parser, counts in self._log_files(name, counts_out):
            # nginx logs are read by the Rust parser when it is built.
            rows = match_file(
                name, source.path, source.offset, parser, self._run_id(), counts, tick
            )
            if rows is None:
                rows = self._python_rows(name, source, parser, counts, tick)
            yield from rows

    def collect_logs(self, sink: Callable[[TierBatch], None]) -> list[FileCounts]:
        """Sends the run's records of every component to `sink` in batches; the counts.
        nginx logs go as the Rust parser's tables (no object per record) when it is
        built."""
        counts: list[FileCounts] = []
        for name in self.components:
            for source, parser, found in self._log_files(name, counts):
                tables = match_file_batches(
                    name, source.path, source.offset, parser, self._run_id(), found
                )
                if tables is None:
                    _batched(self._python_rows(name, source, parser, found, None), sink)
                    continue
                for batch in tables:
                    sink(batch)
        return counts

    def _log_files(
        self, name: str, counts_out: list[FileCounts]
    ) -> Iterator[tuple[Source, LineParser, FileCounts]]:
        """Each file of component `name`'s log from its mark, with a parser of its own
        and its counts (added to `counts_out`; a log with no file counts as missing)."""
        component = self.components[name]
        if component.log is None:
            return
        sources = log_sources(component.log.path, self.marks.get(name))
        if not sources:
            counts_out.append(FileCounts(component=name, path=component.log.path, missing=True))
        for source in sources:
            counts = FileCounts(component=name, path=source.path)
            counts_out.append(counts)
            # A parser may hold a record across lines (csvlog): a fresh one for each file,
            # and for each reader when several read at once (the agent).
            yield source, get_parser(component.log.format, component.log.log_format), counts

    def _python_rows(
        self,
        name: str,
        source: Source,
        parser: LineParser,
        counts: FileCounts,
        tick: Callable[[], None] | None,
    ) -> Iterator[TierRow]:
        lines = read_from(source.path, source.offset)
        if tick is not None:
            lines = _ticking(lines, tick)
        return match_lines(name, lines, parser, self._run_id(), counts)

    def _run_id(self) -> str:
        if self.run_id is None:
            raise RuntimeError("the collector was not started")
        return self.run_id

    def report(self) -> dict[str, Any] | None:
        """What collection.json says about this collector beyond its counts: its problems
        (`warnings`), and those of each component (`component_warnings`); None if none."""
        if not self.problems:
            return None
        warnings = {name: list(lines) for name, lines in self.component_warnings.items()}
        return {"warnings": list(self.problems), "component_warnings": warnings}

    def log_marks(self) -> dict[str, Any]:
        """Where each log was marked, for run.json."""
        return {name: mark.as_dict() for name, mark in self.marks.items()}

    def close(self) -> None:
        """Nothing to release."""


def _ticking(lines: Iterable[str], tick: Callable[[], None]) -> Iterator[str]:
    for n, line in enumerate(lines, start=1):
        if n % TICK_LINES == 0:
            tick()
        yield line


def _batched(rows: Iterable[TierRow], sink: Callable[[list[TierRow]], None]) -> None:
    batch: list[TierRow] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH_ROWS:
            sink(batch)
            batch = []
    if batch:
        sink(batch)
