"""A plan's load from N generators on a Ray cluster, into one run folder.

The parent (this process) connects to the cluster, starts N actors spread over its nodes
(actor.py), gives each its share of the load (shares.py) with one start time a few
seconds ahead, and waits for them, bounded by the plan's durations. Their requests are
copied here in chunks while they run (stream.py) and merged at the end (merge.py). A
generator that dies, whose node is lost, or that is still running well past the planned
end, is lost: the run goes on with what the others measured and what it sent before its
last chunk, and run.json's `generators` says which was lost, why, and about how many of
its requests were never copied.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinchpoint.load import interrupts
from pinchpoint.load.abort_rules import Watches
from pinchpoint.load.distributed.actor import Generator
from pinchpoint.load.distributed.merge import merge_parquet, merge_snapshots, merge_summaries
from pinchpoint.load.distributed.shares import check_ray_plan, share_of, shares
from pinchpoint.load.distributed.stream import CHUNK_S, Streams
from pinchpoint.load.engine import LoadResult
from pinchpoint.load.engine_config import EngineConfig, engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import Plan
from pinchpoint.rundir import files

# How long the generators get to start (a worker process each, on every node).
READY_S = 60.0
# Their first step starts once they are all ready and their hooks loaded, after a lead of
# MIN_LEAD_S and LEAD_TRIPS round trips to the slowest of them, at most START_LEAD_S (the
# engine takes no more than 120 s). A start that reaches its generator later is lost.
MIN_LEAD_S = 0.5
LEAD_TRIPS = 10
START_LEAD_S = 3.0
# How long past the planned end (and the longest request timeout) a generator may take to
# end its run and write its requests before it counts as lost.
LATE_S = 30.0
TICK_S = 1.0
POLL_S = 0.1
NAMESPACE = "pinchpoint"
# The run folder's scratch folder for the generators' streams while they are copied.
PARTS = "requests"
# A Ray Client server starts a server process per driver; on a busy head that start can
# fail once and succeed on the next try, so a ray:// connection is tried this often.
CONNECT_TRIES = 3
CONNECT_PAUSE_S = 2.0


@dataclass
class _Gen:
    index: int
    actor: Any
    where: dict[str, Any] = field(default_factory=dict)
    config: EngineConfig | None = None
    result: dict[str, Any] | None = None
    lost: str | None = None
    lost_at: float = 0.0
    rows: int = 0
    # The seconds of its records never copied here, when it was lost.
    unreceived_s: float = 0.0

    def lose(self, reason: str) -> None:
        self.lost, self.lost_at = reason, time.time()

    def entry(self) -> dict[str, Any]:
        """This generator in run.json's `generators`."""
        out: dict[str, Any] = {"generator": self.index}
        out.update({k: self.where[k] for k in ("node", "host", "ip") if k in self.where})
        if self.config is not None:
            out.update(share_of(self.config))
        out["requests"] = self.rows
        if self.result is not None:
            summary = self.result["summary"]
            if summary["windows"]:
                out["started"] = summary["windows"][0][0] / 1e6
            out.update({k: self.result[k] for k in ("cpu_cores", "threads", "saturated")})
        if self.lost is not None:
            out.update({"lost": True, "reason": self.lost})
            out.update(self._unreceived())
        return out

    def _unreceived(self) -> dict[str, Any]:
        """About how many of a lost generator's requests never reached this process: its
        rate over the records kept, for the seconds after its last copy."""
        seconds = round(self.unreceived_s, 2)
        kept_s = max((self.lost_at - self.unreceived_s) - self._start_s(), 0.0)
        rate = self.rows / kept_s if kept_s > 0 else 0.0
        return {"unreceived_s": seconds, "unreceived_estimate": round(rate * seconds)}

    def _start_s(self) -> float:
        start_us = self.config.get("start_at_us") if self.config else None
        return start_us / 1e6 if start_us else self.lost_at


def actor_name(run_id: str, index: int) -> str:
    """The Ray name of a run's generator `index` (namespace NAMESPACE)."""
    return f"pinchpoint-{run_id}-{index}"


def _connect(ray: Any, address: str) -> None:
    """Connects this process to the cluster as a driver; a PlanError when it cannot."""
    tries = CONNECT_TRIES if address.startswith("ray://") else 1
    for attempt in range(1, tries + 1):
        try:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            return
        except (ConnectionError, ValueError, RuntimeError) as e:
            ray.shutdown()
            if attempt == tries or "failure from server" not in str(e):
                said = f" (tried {attempt} times)" if attempt > 1 else ""
                raise PlanError(f"cannot reach the Ray cluster at {address}{said}: {e}") from None
            time.sleep(CONNECT_PAUSE_S)


def run_on_ray(
    plan: Plan, run_id: str, run_dir: Path, on_tick: Callable[[dict], None] | None = None
) -> LoadResult:
    """Runs the plan's load from generators on the plan's Ray cluster; writes
    `requests.parquet` into run_dir. The summary has the generators' `generators` entries."""
    check_ray_plan(plan)
    ray = _ray()
    address = plan.generators.ray or "auto"
    owned = not ray.is_initialized()
    if owned:
        _connect(ray, address)
    gens: list[_Gen] = []
    try:
        gens = _start_actors(ray, plan, run_id)
        base = engine_config(plan, run_id, run_dir / files.REQUEST_STREAM)
        _prepare(ray, plan, gens, base["timeout_s"])
        start_at = time.time() + _lead(ray, gens)
        configs = shares(base, plan, len(gens), int(start_at * 1e6))
        for gen, config in zip(gens, configs, strict=True):
            gen.config = config
        _start_runs(ray, gens, start_at)
        streams = Streams(ray, run_dir / PARTS, {g.index: g.actor for g in gens})
        end = start_at + sum(lv.duration for lv in plan.load.levels())
        watch = Watches.of(plan.sla, plan.abort)
        deadline = end + _longest_timeout(plan) + LATE_S
        halted = _wait(ray, gens, streams, deadline, _Ticks(on_tick, watch))
        result = _gather(ray, plan, gens, streams, run_dir, halted)
        if watch is not None and watch.fired is not None:
            result.summary["aborted"] = watch.fired.as_json()
            result.summary["interrupted"] = interrupts.count() > 0
            result.interrupted = result.summary["interrupted"]
        return result
    finally:
        for gen in gens:
            ray.kill(gen.actor)
        shutil.rmtree(run_dir / PARTS, ignore_errors=True)
        if owned:
            ray.shutdown()


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise PlanError(
            f"generators on Ray need the ray package (pip install 'pinchpoint[ray]'): {e}"
        ) from None
    return ray


def _start_actors(ray: Any, plan: Plan, run_id: str) -> list[_Gen]:
    nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
    count = plan.generators.count or len(nodes)
    if count < 1:
        raise PlanError("the Ray cluster has no alive node with a CPU for a generator")
    remote = ray.remote(num_cpus=1, max_concurrency=6)(Generator)
    gens = [
        _Gen(
            i,
            remote.options(
                name=actor_name(run_id, i), namespace=NAMESPACE, scheduling_strategy="SPREAD"
            ).remote(i),
        )
        for i in range(count)
    ]
    refs = [g.actor.where.remote() for g in gens]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=READY_S)
    if len(ready) < len(refs):
        for g in gens:
            ray.kill(g.actor)
        raise PlanError(
            f"{len(ready)} of {count} generators started within {READY_S:g} s: each needs "
            f"1 CPU, and the cluster's {len(nodes)} alive nodes have "
            f"{sum(n['Resources'].get('CPU', 0) for n in nodes):g}"
        )
    for g, ref in zip(gens, refs, strict=True):
        g.where = ray.get(ref)
    return gens


def _prepare(ray: Any, plan: Plan, gens: list[_Gen], timeout_s: float) -> None:
    """Loads the plan's hook on every generator (a process each, which may take seconds
    on a busy node) before the start time is chosen."""
    hook, hook_file = plan.load.hook, None
    if hook is not None and hook.rpartition(":")[0].endswith(".py"):
        hook_file = Path(hook.rpartition(":")[0]).read_text()
    refs = {g.actor.prepare.remote(hook, hook_file, timeout_s): g for g in gens}
    _replies(ray, refs, READY_S, f"its hook had not loaded {READY_S:g} s after it was ready")


def _lead(ray: Any, gens: list[_Gen]) -> float:
    """How long before the common start time the starts are sent: the slowest round trip
    to a generator, LEAD_TRIPS times, over MIN_LEAD_S."""
    began = time.monotonic()
    refs = [g.actor.ping.remote() for g in gens if g.lost is None]
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=START_LEAD_S)
    return min(MIN_LEAD_S + LEAD_TRIPS * (time.monotonic() - began), START_LEAD_S)


def _start_runs(ray: Any, gens: list[_Gen], start_at: float) -> None:
    """Starts every generator's engine; each waits for the common start time."""
    refs = {g.actor.start.remote(g.config): g for g in gens if g.lost is None}
    _replies(
        ray,
        refs,
        max(start_at - time.time(), 0.0),
        "its engine had not started by the common start time",
    )


def _replies(ray: Any, refs: dict[Any, _Gen], timeout_s: float, late_reason: str) -> None:
    """Waits for the generators' replies: a generator late or gone is lost; one that
    refused stops the run."""
    if not refs:
        return
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    for ref in late:
        refs[ref].lose(late_reason)
    for ref in ready:
        try:
            ray.get(ref)
        except ray.exceptions.RayActorError as e:
            refs[ref].lose(_reason(e))
        except ray.exceptions.RayTaskError as e:
            raise PlanError(f"generator {refs[ref].index} cannot start: {_reason(e)}") from None


def _wait(
    ray: Any,
    gens: list[_Gen],
    streams: Streams,
    deadline: float,
    ticks: _Ticks,
) -> int:
    """Waits for the generators' results until `deadline`; stops them on a SIGINT or
    SIGTERM (abandons their requests in flight on a second). Returns how far they were
    halted: 0 not, 1 stopped, 2 abandoned."""
    pending = {g.actor.finish.remote(): g for g in gens if g.lost is None}
    halted, uncaught = 0, 0
    next_tick = time.monotonic() + TICK_S
    while pending:
        try:
            wanted = min(max(interrupts.count(), uncaught, ticks.aborted), 2)
            if wanted > halted:
                halted = wanted
                for g in pending.values():
                    (g.actor.abandon if halted == 2 else g.actor.stop).remote()
                if interrupts.count() or uncaught:
                    _tell(halted)
            if time.time() > deadline:
                for g in pending.values():
                    g.lose(f"no result {LATE_S:g} s after the run's planned end")
                return halted
            streams.poll({g.index for g in pending.values()})
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                gen = pending.pop(ref)
                try:
                    gen.result = ray.get(ref)
                except ray.exceptions.RayError as e:
                    gen.lose(_reason(e))
            if pending and ticks.wanted() and time.monotonic() >= next_tick:
                next_tick = time.monotonic() + TICK_S
                ticks.tick(ray, list(pending.values()))
        except KeyboardInterrupt:
            uncaught += 1
    return halted


def _tell(halted: int) -> None:
    caught = interrupts.active()
    if caught is None:
        return
    if halted == 1:
        caught.tell(
            f"{caught.first_name()}: stopping the generators after their requests in flight "
            "(Ctrl-C again to abandon them)"
        )
    else:
        caught.tell("Abandoning the generators' requests in flight")


@dataclass
class _Ticks:
    """Each second, the generators' live counters as one run's: to the live view, and to
    the watch of the objectives that abort (which stops every generator when one breaks)."""

    on_tick: Callable[[dict], None] | None
    watch: Watches | None
    aborted: int = 0

    def wanted(self) -> bool:
        return self.on_tick is not None or self.watch is not None

    def tick(self, ray: Any, gens: list[_Gen]) -> None:
        refs = [g.actor.snapshot.remote() for g in gens]
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=TICK_S / 2)
        snapshots = []
        for ref in ready:
            try:
                if (snapshot := ray.get(ref)) is not None:
                    snapshots.append(snapshot)
            except ray.exceptions.RayError:
                continue
        if not snapshots:
            return
        merged = merge_snapshots(snapshots)
        if self.watch is not None and self.watch.observe(merged, time.monotonic()):
            self.aborted = 1
            caught = interrupts.active()
            if caught is not None and self.watch.fired is not None:
                caught.tell(f"{self.watch.fired.reason()}: stopping the generators")
        if self.on_tick is not None:
            self.on_tick(merged)


def _gather(
    ray: Any, plan: Plan, gens: list[_Gen], streams: Streams, run_dir: Path, halted: int
) -> LoadResult:
    """Copies the rest of each generator's requests here, merges them and the summaries.
    A lost generator's requests are those copied before it was lost."""
    parts = []
    for g in gens:
        if g.result is not None:
            try:
                streams.drain(g.index, g.result["stream_size"])
                ray.get(g.actor.close.remote(), timeout=CHUNK_S)
            except (ray.exceptions.RayError, RuntimeError) as e:
                g.result = None
                g.lose(f"lost while its requests were copied: {_reason(e)}")
        if g.lost is not None:
            g.unreceived_s = streams.copies[g.index].lost_window_s(g.lost_at)
        part = run_dir / PARTS / f"part-{g.index}.parquet"
        g.rows = streams.to_parquet(g.index, part)
        if g.rows:
            parts.append(part)
    done = [g for g in gens if g.result is not None]
    if not done:
        lost = "; ".join(f"generator {g.index}: {g.lost}" for g in gens)
        raise RuntimeError(f"every generator was lost: {lost}")
    path = run_dir / files.REQUESTS
    rows = merge_parquet(parts, path)
    summary = merge_summaries([g.result["summary"] for g in done if g.result], plan.load.levels())
    summary["interrupted"] = summary["interrupted"] or halted > 0
    summary["generators"] = [g.entry() for g in gens]
    return LoadResult(
        summary=summary, requests_path=path, rows=rows, interrupted=summary["interrupted"]
    )


def _longest_timeout(plan: Plan) -> float:
    timeouts = [r.timeout for r in plan.request] + [s.timeout for f in plan.flow for s in f.step]
    return max([plan.load.timeout, *(t or 0.0 for t in timeouts)])


def _reason(error: BaseException) -> str:
    """A Ray error whole, in one line for run.json and the terminal: its lines that are not
    indented (Ray indents the actor's ids and the traceback), and the pid it names."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if line[:1] not in ("", " ", "\t")]
    said = " ".join(lines) or type(error).__name__
    pid = re.search(r"^\s+pid: (\d+)$", text, re.MULTILINE)
    return f"{said} (pid {pid.group(1)})" if pid else said
