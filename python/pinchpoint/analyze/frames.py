"""Reads what a run folder holds into the frames the analysis works on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pinchpoint.plan.model import Plan, entry_first, load_plan
from pinchpoint.rundir import files


@dataclass
class RunData:
    run_dir: Path
    run: dict
    plan: Plan
    requests: pl.DataFrame
    tiers: pl.DataFrame
    resources: pl.DataFrame
    # Calls between tiers that traces showed (collection.json `calls`), beside the plan's.
    traced_calls: dict[str, list[str]] = field(default_factory=dict)

    def endpoint_names(self) -> list[str]:
        """The name of each `endpoint` index of the records: as the load recorded them
        (a locustfile's request names), else the plan's requests and flow steps."""
        recorded = self.run.get("endpoint_names")
        return list(recorded) if recorded else self.plan.endpoints()

    def tier_graph(self) -> tuple[list[str], dict[str, list[str]]]:
        """The tiers from the entry to the leaves, and what each calls: the plan's
        components and calls, then those the traces showed."""
        calls = {c.name: list(c.calls) for c in self.plan.component}
        for caller, callees in self.traced_calls.items():
            mine = calls.setdefault(caller, [])
            for callee in callees:
                calls.setdefault(callee, [])
                if callee not in mine and callee != caller:
                    mine.append(callee)
        return entry_first(calls), calls


def read_run(run_dir: Path) -> RunData:
    """The folder's files; a table the run did not write (no components, no samples) is
    empty. Raises when run.json or plan.toml is missing or a file cannot be read."""
    folder = files.RunFolder(run_dir)

    def table(name: str) -> pl.DataFrame:
        return folder.read_frame(name) if folder.has(name) else pl.DataFrame()

    return RunData(
        run_dir=run_dir,
        run=dict(folder.read_run()),
        plan=load_plan(folder / files.PLAN),
        requests=table(files.REQUESTS),
        tiers=table(files.TIERS),
        resources=table(files.RESOURCES),
        traced_calls=_traced_calls(folder),
    )


def _traced_calls(folder: files.RunFolder) -> dict[str, list[str]]:
    if not folder.has(files.COLLECTION):
        return {}
    calls = folder.read_collection().get("calls") or {}
    return {
        str(caller): [str(c) for c in callees]
        for caller, callees in calls.items()
        if isinstance(callees, list)
    }
