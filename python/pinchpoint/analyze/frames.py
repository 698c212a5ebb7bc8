"""Reads what a run folder holds into the frames the analysis works on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pinchpoint.plan.model import Plan, load_plan


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
    run = json.loads((run_dir / "run.json").read_text())
    return RunData(
        run_dir=run_dir,
        run=run,
        plan=load_plan(run_dir / "plan.toml"),
        requests=_read(run_dir / "requests.parquet"),
        tiers=_read(run_dir / "tiers.parquet"),
        resources=_read(run_dir / "resources.parquet"),
    )
