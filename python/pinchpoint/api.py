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
run.check_sla()                         # the plan's [sla] as the analysis checked it
run.check_sla({"p99_ms": 50})           # other thresholds checked on this run's requests
```

Each file is read on first use and kept (`rundir.view.RunView`, the reader every stage
uses); a missing one raises FileNotFoundError naming it.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

from pinchpoint.rundir import files
from pinchpoint.rundir.view import RunView

if TYPE_CHECKING:
    from pinchpoint.analyze.sla import SlaResult
    from pinchpoint.plan.sla import Sla


class Run(RunView):
    """One run folder. Attributes load their file on first use."""

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @property
    def run_id(self) -> str:
        """The run's id: run.json's, else the folder's name."""
        if self.has(files.RUN):
            value = self.run.get("run_id")
            if isinstance(value, str) and value:
                return value
        return self.path.name

    def check_sla(self, sla: Sla | dict[str, Any] | None = None) -> list[SlaResult]:
        """The plan's [sla] table as the analysis checked it (verdict.json's `sla`), overall
        and per step; an empty list when there is none. With `sla`, those thresholds checked
        on this run's requests now. Raises LookupError for a verdict.json written before it
        kept the SLA (analyze the run again)."""
        if sla is not None:
            from pinchpoint.analyze.sla import check_sla

            return check_sla(sla, self)
        from pinchpoint.analyze.sla_record import stored_sla

        outcome = stored_sla(self.verdict)
        if outcome is not None and outcome.problem is not None:
            raise FileNotFoundError(f"{self.path}: the SLA was not checked: {outcome.problem}")
        return outcome.results if outcome is not None else []


def open_run(path: str | PathLike[str]) -> Run:
    """The run folder at `path`. Raises FileNotFoundError when it is not a folder or holds
    none of a run's files (run.json, requests.parquet, verdict.json, plan.toml)."""
    run = Run(path)
    if not run.path.is_dir():
        raise FileNotFoundError(f"{run.path}: no such run folder")
    if not run.is_run_folder():
        raise FileNotFoundError(
            f"{run.path}: not a run folder (none of {', '.join(files.MARKERS)})"
        )
    return run
