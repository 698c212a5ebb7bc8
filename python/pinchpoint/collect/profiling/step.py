"""The profile of one step, taken as the run goes: when the load's live counters say the
profiled step has begun, py-spy samples each Python tier for the profile's duration, cut
short to end before the step does; after the load, the stacks go into `profile.json`.

What could not be sampled (no py-spy, tracing refused, no Python process) becomes a
problem the run reports as a warning; the run goes on without the profile.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pinchpoint.collect.profiling.pyspy import SpyRun, pyspy_path, pyspy_version
from pinchpoint.collect.profiling.stacks import kept, read_folded
from pinchpoint.collect.profiling.targets import python_roots
from pinchpoint.collect.resources.procs import scan
from pinchpoint.collect.resources.sampler import ProcessSelector
from pinchpoint.plan.load_models import Level
from pinchpoint.plan.model import Plan
from pinchpoint.plan.profile import Profile, profiled_step
from pinchpoint.rundir import files

# The live counters come about once a second: the step began up to this long before
# they show it.
TICK_S = 1.0
# Sampling stops this long before the step's planned end.
TAIL_S = 0.5
MIN_SAMPLING_S = 1.0

Tick = Callable[[dict], None]


class StepProfiler:
    """Samples the plan's Python tiers during its profiled step (plan/profile.py)."""

    def __init__(self, profile: Profile, level: Level | None, plan: Plan) -> None:
        self.profile = profile
        self.level = level
        self.problems: list[str] = []
        self._selectors = {
            c.name: ProcessSelector.from_dict(c.process.model_dump(exclude_defaults=True))
            for c in plan.component
            if c.process is not None and c.host is None and profile.component in (None, c.name)
        }
        self._exe = pyspy_path()
        self._runs: dict[str, list[SpyRun]] = {}
        self._dir = tempfile.TemporaryDirectory(prefix="pinchpoint-profile-")
        self._started = False
        if self._exe is None:
            self.problems.append(
                "profile: py-spy is not installed (pip install 'pinchpoint[profile]'); "
                "no profile taken"
            )
        elif not self._selectors:
            self.problems.append("profile: no local component with a [component.process]")

    @classmethod
    def for_plan(cls, plan: Plan) -> StepProfiler | None:
        """The plan's profiler; None when the plan asks for no profile."""
        if plan.profile is None:
            return None
        return cls(plan.profile, profiled_step(plan.profile, plan.load.levels()), plan)

    def watch(self, on_tick: Tick | None) -> Tick:
        """A tick callback that starts sampling when the step begins, then calls `on_tick`."""

        def tick(snapshot: dict) -> None:
            self.tick(snapshot)
            if on_tick is not None:
                on_tick(snapshot)

        return tick

    def tick(self, snapshot: dict) -> None:
        """Starts sampling on the first snapshot of the profiled step."""
        if self._started or self.level is None or self._exe is None:
            return
        if snapshot.get("step") != self.level.index:
            return
        self._started = True
        left = self.level.duration - TICK_S - TAIL_S
        duration = int(max(MIN_SAMPLING_S, min(self.profile.duration, left)))
        for name, selector in self._selectors.items():
            self._runs[name] = self._start(name, selector, duration)

    def _start(self, name: str, selector: ProcessSelector, duration_s: int) -> list[SpyRun]:
        roots = python_roots(selector, scan())
        if not roots:
            if self.profile.component is not None:
                self.problems.append(f"profile: {name} has no process running Python")
            return []
        runs = []
        for pid in roots:
            out = Path(self._dir.name) / f"{name}-{pid}.txt"
            run = SpyRun(pid, out, duration_s, self.profile.rate)
            run.start(str(self._exe))
            runs.append(run)
        return runs

    def finish(self, folder: files.RunFolder, interrupted: bool = False) -> None:
        """Waits for the samplers (interrupted when the load was) and writes profile.json;
        nothing when no step was profiled."""
        try:
            if self._started:
                for runs in self._runs.values():
                    for run in runs:
                        run.finish(interrupt=interrupted)
                folder.write_json(files.PROFILE, self._record())
            elif self.level is not None and self._exe is not None:
                self.problems.append(f"profile: step {self.level.index} never ran; no profile")
        finally:
            self._dir.cleanup()

    def _record(self) -> dict:
        """profile.json: the step, the tool, and per tier its stacks and sampling window."""
        assert self.level is not None and self._exe is not None
        tiers = {}
        for name, runs in self._runs.items():
            if not runs:
                continue
            tiers[name] = self._tier(runs)
            for run in runs:
                if run.problem is not None:
                    self.problems.append(f"profile of {name}: {run.problem}")
        return {
            "tool": pyspy_version(self._exe),
            "step": self.level.index,
            "kind": self.level.kind,
            "level": self.level.level,
            "rate_hz": self.profile.rate,
            "tiers": tiers,
            "problems": list(self.problems),
        }

    def _tier(self, runs: list[SpyRun]) -> dict:
        stacks = sum((read_folded(r.output) for r in runs if r.output.is_file()), start=_empty())
        return {
            "pids": [r.pid for r in runs],
            "start": min(r.started for r in runs),
            "end": max(r.ended or r.started for r in runs),
            "samples": sum(stacks.values()),
            # What sampling cost: py-spy's own CPU seconds over the window.
            "sampler_cpu_s": sum(r.cpu_s for r in runs),
            "stacks": [[stack, n] for stack, n in kept(stacks)],
        }


def _empty() -> Counter[str]:
    return Counter()
