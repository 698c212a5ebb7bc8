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


def _read(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path) if path.exists() else pl.DataFrame()


def read_run(run_dir: Path) -> RunData:
    run = files.RunFolder(run_dir).read_json(files.RUN)
    return RunData(
        run_dir=run_dir,
        run=run,
        plan=load_plan(run_dir / files.PLAN),
        requests=_read(run_dir / files.REQUESTS),
        tiers=_read(run_dir / files.TIERS),
        resources=_read(run_dir / files.RESOURCES),
    )
