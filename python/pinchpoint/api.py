"""A run folder from Python: `pinchpoint.open("runs/<run-id>")`.

```python
import pinchpoint

run = pinchpoint.open("runs/20261122-032409-413d")
run.verdict["headline"]                 # verdict.json, as a dict
run.requests                            # requests.parquet, a Polars DataFrame
run.requests.to_pandas()                # with pandas installed
run.scan_requests()                     # the same unread: a LazyFrame, for runs too big to hold
run.tiers.filter(pl.col("component") == "gunicorn")
run.resources, run.run, run.plan_text   # resources.parquet, run.json, plan.toml
run.check_sla()                         # the plan's [sla] checked on this run
```

Each file is read on first use and kept; a missing one raises FileNotFoundError naming it.
"""

from __future__ import annotations

from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinchpoint.rundir import files

if TYPE_CHECKING:
    import polars as pl

    from pinchpoint.analyze.sla import SlaResult
    from pinchpoint.plan.sla import Sla


class Run:
    """One run folder. Attributes load their file on first use."""

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def run_id(self) -> str:
        """The run's id: run.json's, else the folder's name."""
        file = self.path / files.RUN
        if file.is_file():
            value = self.run.get("run_id")
            if isinstance(value, str) and value:
                return value
        return self.path.name

    @cached_property
    def requests(self) -> pl.DataFrame:
        """requests.parquet: one row per request the engine sent."""
        return self._parquet(files.REQUESTS)

    def scan_requests(self) -> pl.LazyFrame:
        """requests.parquet unread: a query over it reads only the columns it uses, a row
        group at a time with `.collect(engine="streaming")` (what `pinchpoint analyze`
        does, in memory set by the result rather than by the run's requests)."""
        self._file(files.REQUESTS)
        return files.RunFolder(self.path).scan_frame(files.REQUESTS)

    @cached_property
    def tiers(self) -> pl.DataFrame:
        """tiers.parquet: each tier's log records matched to this run."""
        return self._parquet(files.TIERS)

    @cached_property
    def resources(self) -> pl.DataFrame:
        """resources.parquet: CPU and memory of each component, the host and the generator."""
        return self._parquet(files.RESOURCES)

    @cached_property
    def verdict(self) -> dict[str, Any]:
        """verdict.json: the per-step table, the bottleneck, the knee and the USL fit."""
        return self._json(files.VERDICT, "run `pinchpoint analyze` on the folder first")

    @cached_property
    def run(self) -> dict[str, Any]:
        """run.json: the steps' windows, the host, the engine's own counts."""
        return self._json(files.RUN)

    @cached_property
    def plan_text(self) -> str:
        """plan.toml, as it ran."""
        return self._file(files.PLAN).read_text(encoding="utf-8")

    def check_sla(self, sla: Sla | dict[str, Any] | None = None) -> list[SlaResult]:
        """`sla` (default: the plan's [sla] table) checked on this run, overall and per step;
        an empty list when there is none."""
        from pinchpoint.analyze.sla import check_sla
        from pinchpoint.plan.sla import sla_of_plan_text

        if sla is None:
            sla = sla_of_plan_text(self.plan_text, str(self.path / files.PLAN))
        return check_sla(sla, self.path)

    def _file(self, name: str, hint: str = "") -> Path:
        file = self.path / name
        if not file.is_file():
            raise FileNotFoundError(f"{file}: not found" + (f"; {hint}" if hint else ""))
        return file

    def _parquet(self, name: str) -> pl.DataFrame:
        return files.RunFolder(self.path).read_frame(name)

    def _json(self, name: str, hint: str = "") -> dict[str, Any]:
        self._file(name, hint)
        return files.RunFolder(self.path).read_json(name)


def open_run(path: str | PathLike[str]) -> Run:
    """The run folder at `path`. Raises FileNotFoundError when it is not a folder or holds
    none of a run's files (run.json, requests.parquet, verdict.json, plan.toml)."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such run folder")
    if not any((folder / name).is_file() for name in files.MARKERS):
        raise FileNotFoundError(f"{folder}: not a run folder (none of {', '.join(files.MARKERS)})")
    return Run(folder)
