"""Reads what a run folder holds into the frames the analysis works on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pinchpoint.plan.model import Plan, load_plan
from pinchpoint.rundir import files


@dataclass
class RunData:
    run_dir: Path
    run: dict
    plan: Plan
    requests: pl.DataFrame
    tiers: pl.DataFrame
    resources: pl.DataFrame


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
    )
