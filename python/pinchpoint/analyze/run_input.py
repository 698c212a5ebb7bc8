"""What the analysis works on, taken from the run folder's view (`rundir.view.RunView`):
run.json, the plan parsed, the requests as a scan, the tiers' records (whole or sampled),
the resource samples. The requests stay in their file: the analysis reads them through a
scan, once into their digest (per steady window, endpoint and latency bucket) and, where
tiers logged request ids, once for the requests of each window that a tier recorded. The
digest is kept in the folder for the report (rundir/digest_store.py), with what the report
asks of it: each group's extent and the plan's SLA threshold."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from pinchpoint.analyze.sla import over_ms
from pinchpoint.analyze.unlogged import by_callers
from pinchpoint.plan.model import Plan, entry_first, load_plan
from pinchpoint.rundir import files
from pinchpoint.rundir.digest import Digest
from pinchpoint.rundir.scan import collect, columns, schema
from pinchpoint.rundir.steady import Window, steady_windows, with_window
from pinchpoint.rundir.view import RunView


@dataclass
class RunInput:
    view: RunView
    run: dict[str, Any]
    plan: Plan
    requests: pl.LazyFrame  # a scan of requests.parquet
    tiers: pl.DataFrame  # whole, or a sample of the requests' (rundir/tier_sample.py)
    resources: pl.DataFrame
    # Calls between tiers that traces showed (collection.json `calls`), beside the plan's.
    traced_calls: dict[str, list[str]] = field(default_factory=dict)
    # The share of the requests whose tier records `tiers` holds.
    tier_share: float = 1.0
    # Tiers that logged nothing, each timed by its caller's upstream time (analyze/unlogged.py),
    # and the unnamed tiers below callers that name none.
    timed_by: dict[str, str] = field(default_factory=dict)
    unnamed_calls: dict[str, list[str]] = field(default_factory=dict)
    _digest: Digest | None = field(default=None, repr=False)
    _traced: pl.DataFrame | None = field(default=None, repr=False)

    def windows(self) -> list[Window]:
        """Each step's steady part, from run.json."""
        return steady_windows(self.run)

    def digest(self) -> Digest:
        """The requests' digest, `window` indexing `windows()`; computed once."""
        if self._digest is None:
            over = over_ms(self.plan.sla) if self.plan.sla is not None else []
            self._digest = self.view.digest(self.requests, self.windows(), over, extent=True)
        return self._digest

    def traced(self) -> pl.DataFrame:
        """The requests of the steady windows that a tier recorded by their id: `req_id`,
        `window` and `endpoint`; computed once, as big as the tiers' records at most."""
        if self._traced is None:
            self._traced = self._traced_requests()
        return self._traced

    def _traced_requests(self) -> pl.DataFrame:
        names = columns(self.requests)
        empty = pl.DataFrame(
            schema={"req_id": pl.UInt64, "window": pl.UInt32, "endpoint": pl.UInt16}
        )
        if self.tiers.is_empty() or "req_id" not in self.tiers.columns:
            return empty
        if not {"req_id", "step"} <= set(names):
            return empty
        kind = schema(self.requests)["req_id"]
        ids = self.tiers["req_id"].drop_nulls().unique().cast(kind, strict=False)
        endpoint = pl.col("endpoint") if "endpoint" in names else pl.lit(None, pl.UInt16)
        query = (
            with_window(self.requests, self.windows())
            .select("req_id", "window", endpoint.alias("endpoint"))
            .filter(pl.col("window").is_not_null())
            .filter(pl.col("req_id").is_in(ids.implode()))  # a join would hold the requests
        )
        return collect(query)

    def traced_ids(self, window: int, endpoint: int | None = None) -> pl.Series:
        """The request ids of one window (and endpoint) that a tier recorded."""
        kept = self.traced().filter(pl.col("window") == window)
        if endpoint is not None:
            kept = kept.filter(pl.col("endpoint") == endpoint)
        return kept["req_id"]

    def endpoint_names(self) -> list[str]:
        """The name of each `endpoint` index of the records: as the load recorded them
        (a locustfile's request names), else the plan's requests and flow steps."""
        recorded = self.run.get("endpoint_names")
        return list(recorded) if recorded else self.plan.endpoints()

    def tier_graph(self) -> tuple[list[str], dict[str, list[str]]]:
        """The tiers from the entry to the leaves, and what each calls: the plan's
        components and calls, then those the traces showed."""
        calls = {c.name: list(c.calls) for c in self.plan.component}
        for caller, callees in self.unnamed_calls.items():
            calls[caller] = [*calls.get(caller, []), *callees]
        for caller, callees in self.traced_calls.items():
            mine = calls.setdefault(caller, [])
            for callee in callees:
                calls.setdefault(callee, [])
                if callee not in mine and callee != caller:
                    mine.append(callee)
        return entry_first(calls), calls


def read_input(view: RunView) -> RunInput:
    """What the analysis needs of the folder; a table the run did not write (no
    components, no samples) is empty. Raises when run.json or plan.toml is missing or a
    file cannot be read."""
    tiers = view.tier_sample
    data = RunInput(
        view=view,
        run=view.run,
        plan=load_plan(view.plan_path()),
        requests=view.scan_requests() if view.has(files.REQUESTS) else pl.LazyFrame(),
        tiers=tiers.frame,
        tier_share=tiers.share,
        resources=view.resources if view.has(files.RESOURCES) else pl.DataFrame(),
        traced_calls=_traced_calls(view),
    )
    _, calls = data.tier_graph()
    timed = by_callers(data.tiers, calls)
    data.tiers, data.timed_by = timed.tiers, timed.timed_by
    data.unnamed_calls = {
        caller: [c for c in callees if c not in calls.get(caller, [])]
        for caller, callees in timed.calls.items()
        if caller in calls and [c for c in callees if c not in calls.get(caller, [])]
    }
    return data


def _traced_calls(view: RunView) -> dict[str, list[str]]:
    if not view.has(files.COLLECTION):
        return {}
    calls = view.collection.get("calls") or {}
    return {
        str(caller): [str(c) for c in callees]
        for caller, callees in calls.items()
        if isinstance(callees, list)
    }
