"""A run folder left by a run that was killed (kill -9, a crash, the machine lost):
rebuilt as far as its files allow, so `pinchpoint analyze` can give a partial verdict.

A run writes `plan.toml` first, streams its records to `requests.arrows` while the load
goes, and writes `requests.parquet`, `resources.parquet`, `tiers.parquet`,
`collection.json` and last `run.json` after it. Killed during the load, the folder holds
the plan and the records stream only. From those:
- `requests.parquet` is converted from the stream (a batch cut short by the kill is lost);
- `run.json` is rebuilt from the plan and the records: each step's window from the first
  and last request it sent, the step's load level from the plan. The host facts are
  those of the host analyzing (it usually is the one that ran). It is marked
  `interrupted` and `partial`, and `recovered` says what was rebuilt and what is missing.

The tiers' records are collected again from the logs of the components on this host,
read whole, since the marks were lost with run.json: a line is the run's by its tag, never
by its place in the file. The resource samples and the logs of components behind agents
are not rebuilt.
"""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import polars as pl

from pinchpoint.load.engine import recover_records
from pinchpoint.plan.model import Plan, load_plan
from pinchpoint.redact import private_files
from pinchpoint.rundir import files
from pinchpoint.rundir.shapes import RunJson
from pinchpoint.rundir.view import RunView

# What a complete run folder holds besides the plan, the records and run.json, and
# what each is for the reader.
LATER_FILES = {
    files.TIERS: "the tiers' log records",
    files.RESOURCES: "the resource samples",
    files.COLLECTION: "the collection summary",
    files.HISTOGRAMS: "the engine's histograms",
}
# Written only for a plan with components.
TIER_FILES = (files.TIERS, files.COLLECTION)


@dataclass
class Recovery:
    """What `recover` rebuilt and what the folder still lacks (empty: nothing to do)."""

    rebuilt: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    records: int | None = None

    @property
    def partial(self) -> bool:
        return files.RUN in self.rebuilt

    def line(self) -> str:
        """One line for the terminal."""
        *head, last = self.rebuilt
        rebuilt = f"{', '.join(head)} and {last}" if head else last
        sources = f"plan.toml and {self.records} request records"
        if files.TIERS in self.rebuilt:
            sources = f"plan.toml, {self.records} request records and the logs on this host"
        return f"Rebuilt {rebuilt} of a killed run from {sources}."


class RecoveryError(ValueError):
    """The folder lacks what a rebuild needs (the plan, or any request record)."""


@private_files()
def recover(run_dir: Path) -> Recovery:
    """Converts a leftover records stream and, when run.json is missing, rebuilds it
    from plan.toml and the records (files for this user only, as the run's). Raises
    RecoveryError when run.json is missing and cannot be rebuilt."""
    out = Recovery()
    view = RunView(run_dir)
    if view.exists(files.REQUEST_STREAM):
        try:
            out.records = recover_records(run_dir)
            out.rebuilt.append(files.REQUESTS)
        except RuntimeError as e:
            # Nothing readable in it (killed before the first batch was written).
            name = files.REQUEST_STREAM
            out.missing.append(f"the records ({name} unreadable: {_one_line(e)})")
    if view.exists(files.RUN):
        return out
    if not view.has(files.PLAN):
        raise RecoveryError(f"{run_dir}: run.json and plan.toml are missing: nothing to rebuild")
    if not view.has(files.REQUESTS):
        raise RecoveryError(f"{run_dir}: run.json is missing and no request was recorded")
    plan = load_plan(view.plan_path())
    # A search's probes live in levels/ until they are merged (a --find-knee plan.toml
    # does not say find_knee).
    if plan.load.find_knee or view.exists(files.LEVELS):
        raise RecoveryError(f"{run_dir}: a find_knee run killed during its search is not rebuilt")
    requests = view.requests
    if requests.height == 0:
        raise RecoveryError(f"{run_dir}: run.json is missing and no request was recorded")
    out.records = requests.height
    if not view.exists(files.TIERS):
        out.rebuilt += _tier_logs(plan, run_dir)
        if any(c.host is not None and c.log is not None for c in plan.component):
            out.missing.append("the logs of the components on agents")
    expected = [n for n in LATER_FILES if plan.component or n not in TIER_FILES]
    out.missing += [f"{LATER_FILES[n]} ({n})" for n in expected if not view.exists(n)]
    run = rebuilt_run(run_dir.name, plan, requests)
    run["recovered"] = {"rebuilt": [*out.rebuilt, files.RUN], "missing": out.missing}
    view.folder.write_run(cast(RunJson, run))
    out.rebuilt.append(files.RUN)
    return out


def _tier_logs(plan: Plan, run_dir: Path) -> list[str]:
    """tiers.parquet and collection.json from the logs of the plan's components on this
    host, read whole (the run's marks were lost with run.json): its lines are its by their
    tag, however many other runs wrote there since. What it wrote, or nothing."""
    local = [c for c in plan.component if c.host is None and c.log is not None]
    if not local:
        return []
    from pinchpoint.collect.gather import write_logs
    from pinchpoint.collect.sources.local import LocalCollector

    collector = LocalCollector(local)
    collector.read_whole_logs(run_dir.name)
    write_logs([collector], run_dir.name, run_dir, [c.name for c in local])
    return [files.TIERS, files.COLLECTION]


def rebuilt_run(run_id: str, plan: Plan, requests: pl.DataFrame) -> dict:
    """run.json of a killed run, from its plan and its records."""
    at = "intended_us" if "intended_us" in requests.columns else "start_us"
    ends = pl.col("start_us") + pl.col(
        "service_us" if "service_us" in requests.columns else "latency_us"
    )
    by_step = (
        requests.group_by("step")
        .agg(pl.col(at).min().alias("first"), pl.col(at).max().alias("last"))
        .sort("step")
    )
    levels = plan.load.levels()
    ran = [(int(s), first, last) for s, first, last in by_step.iter_rows() if s < len(levels)]
    steps = []
    for n, (index, first, last) in enumerate(ran):
        level = levels[index]
        start = first / 1e6
        # A step followed by another ran its whole duration; the last one was cut short
        # by the kill, after its last request sent.
        end = start + level.duration if n + 1 < len(ran) else last / 1e6 + 1e-6
        entry = {
            "step": index,
            "users": level.users if level.kind == "users" else 0,
            "kind": level.kind,
            "level": level.level,
            "start": start,
            "end": end,
        }
        if level.name:
            entry["name"] = level.name
        steps.append(entry)
    cpu_count = os.cpu_count() or 1
    return {
        "run_id": run_id,
        "started": cast(float, requests[at].min()) / 1e6,
        "ended": requests.select(ends.max()).item() / 1e6,
        "interrupted": True,
        "partial": True,
        "warmup_s": plan.load.warmup,
        "steps": steps,
        "records": requests.height,
        "records_error": None,
        "engine": {"threads": plan.load.threads or cpu_count},
        "host": {
            "hostname": socket.gethostname(),
            "cpu_count": cpu_count,
            "platform": platform.platform(),
            "python": platform.python_version(),
            "assumed": True,
        },
        "log_marks": {},
    }


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())
