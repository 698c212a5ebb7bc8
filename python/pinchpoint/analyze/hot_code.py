"""The hot code of a tier that computes: from the stacks py-spy sampled during one step
(`profile.json`), the functions that took the most samples by their own time (the
innermost frame) and by their total time (anywhere on the stack), as evidence for a
finding that names that tier's CPU or its pool of busy workers.

By total time, two kinds of function say nothing of where the time goes and are left out:
the trunk, on the stack of nearly every sample (the server's loop and its dispatch of a
request), and pass-throughs, whose samples nearly all went through one callee (a
wrapper). The list keeps the functions where the time divides, or is spent: a function
on nearly every sample that spends a good share of them itself (a handler that does the
work in its own frame) is kept, trunk or not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from pinchpoint.analyze.causes import CAUSES
from pinchpoint.analyze.findings import pct
from pinchpoint.rundir.shapes import VerdictJson
from pinchpoint.rundir.view import RunView

TOP = 5
# A function whose samples went through one callee at least this share of the time is
# a pass-through.
PASS_THROUGH = 0.95
# A function on the stack of at least this share of the samples is the trunk...
TRUNK = 0.8
# ...unless it was the innermost frame of at least this share of them: it does the work.
SPENDS = 0.25


@dataclass(frozen=True)
class FunctionTime:
    name: str  # py-spy's frame: `function (file:first line)`
    own: int  # samples where it was the innermost frame
    total: int  # samples where it was anywhere on the stack

    def as_json(self, samples: int) -> dict[str, Any]:
        return {
            "function": self.name,
            "self_share": self.own / samples if samples else 0.0,
            "total_share": self.total / samples if samples else 0.0,
        }


def function_times(stacks: list[tuple[str, int]]) -> list[FunctionTime]:
    """Each function's own and total samples; a recursive function counts once a sample."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for stack, n in stacks:
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    return [FunctionTime(name, own[name], total[name]) for name in total]


def pass_through(stacks: list[tuple[str, int]], total: dict[str, int]) -> set[str]:
    """The functions whose samples nearly all went through one callee."""
    edges: Counter[tuple[str, str]] = Counter()
    for stack, n in stacks:
        frames = stack.split(";")
        for caller, callee in set(pairwise(frames)):
            if caller != callee:
                edges[caller, callee] += n
    return {caller for (caller, _), n in edges.items() if n >= PASS_THROUGH * total[caller]}


def top_functions(stacks: list[tuple[str, int]], top: int = TOP) -> dict[str, Any]:
    """The functions with the most own time, and with the most total time less the trunk
    and the pass-throughs, with their shares of the samples."""
    samples = sum(n for _, n in stacks)
    times = function_times(stacks)
    skipped = pass_through(stacks, {t.name: t.total for t in times})
    skipped |= {t.name for t in times if t.total >= TRUNK * samples and t.own < SPENDS * samples}
    by_self = sorted((t for t in times if t.own), key=lambda t: (-t.own, t.name))[:top]
    by_total = sorted(
        (t for t in times if t.name not in skipped), key=lambda t: (-t.total, t.name)
    )[:top]
    return {
        "samples": samples,
        "by_self": [t.as_json(samples) for t in by_self],
        "by_total": [t.as_json(samples) for t in by_total],
    }


def evidence_lines(
    tier: str, profile: dict[str, Any], top: dict[str, Any], cpu_count: int
) -> list[str]:
    """What the profile says of `tier`, in the evidence's words."""
    spent = "; ".join(f"{f['function']} {pct(f['self_share'])}" for f in top["by_self"])
    within = "; ".join(f"{f['function']} {pct(f['total_share'])}" for f in top["by_total"])
    level = profile.get("level")
    at = f"{level:g} {'req/s' if profile.get('kind') == 'rate' else 'users'}"
    lines = [
        f"py-spy sampled {tier} at {at} (step {profile.get('step')}, {top['samples']} "
        f"samples): by own time {spent}"
    ]
    if within:
        lines.append(f"{tier}'s functions by total time (with their callees): {within}")
    window = (top.get("end") or 0.0) - (top.get("start") or 0.0)
    if window > 0 and top.get("sampler_cpu_s") is not None:
        used = top["sampler_cpu_s"]
        lines.append(
            f"sampling cost py-spy {used:.2f} CPU-seconds in {window:.0f} s, "
            f"{pct(used / window / cpu_count)} of the host's {cpu_count} cores"
        )
    return lines


def read_profile(view: RunView) -> dict[str, Any] | None:
    """profile.json, or None when the run took no profile or it cannot be read."""
    profile = view.profile
    return profile if profile is not None and isinstance(profile.get("tiers"), dict) else None


def add_hot_code(verdict: VerdictJson, profile: dict[str, Any], cpu_count: int) -> None:
    """Puts each profiled tier's top functions in verdict.json (`profile`) and in the
    evidence of every finding about that tier's CPU or pool of workers."""
    tops = {
        tier: top_functions([(str(s), int(n)) for s, n in data.get("stacks") or []])
        for tier, data in profile["tiers"].items()
    }
    kept = ("start", "end", "sampler_cpu_s")
    for tier, top in tops.items():
        top.update({key: profile["tiers"][tier].get(key) for key in kept})
    verdict["profile"] = {
        "step": profile.get("step"),
        "tool": profile.get("tool"),
        "tiers": tops,
        "problems": list(profile.get("problems") or []),
    }
    for finding in [verdict.get("bottleneck"), *(verdict.get("findings") or [])]:
        if not isinstance(finding, dict) or not _computes(finding):
            continue
        sampled = tops.get(str(finding.get("component")))
        if sampled is not None and sampled["samples"]:
            lines = evidence_lines(str(finding["component"]), profile, sampled, cpu_count)
            finding["evidence"] = [*finding.get("evidence", []), *lines]
    _name_function(verdict, tops)


def _name_function(verdict: VerdictJson, tops: dict[str, dict[str, Any]]) -> None:
    """The headline of a computing bottleneck carried by one request names the function
    that holds most of its tier's own time, where one holds a good share of it."""
    bottleneck = verdict.get("bottleneck")
    if not isinstance(bottleneck, dict) or not bottleneck.get("request"):
        return
    if not _computes(bottleneck):
        return
    own = (tops.get(str(bottleneck.get("component"))) or {}).get("by_self") or []
    if own and own[0]["self_share"] >= SPENDS:
        verdict["headline"] = f"{verdict['headline']}: {own[0]['function']}"


def _computes(finding: Mapping[str, Any]) -> bool:
    """Whether the finding's cause is about a tier that computes (causes/cause.py)."""
    cause = CAUSES.behind(str(finding.get("resource")))
    return cause is not None and cause.computes
