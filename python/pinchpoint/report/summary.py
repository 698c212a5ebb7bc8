"""The verdict's words: headline, bottleneck facts, evidence, generator warning."""

from __future__ import annotations

import time
from typing import Any

from pinchpoint.report import fmt

# Below this R² the scalability law's fit says nothing worth printing.
MIN_R2 = 0.5


def bottleneck(verdict: dict[str, Any]) -> dict[str, Any] | None:
    found = verdict.get("bottleneck")
    return found if isinstance(found, dict) else None


def headline(verdict: dict[str, Any]) -> str:
    text = verdict.get("headline")
    if isinstance(text, str) and text.strip():
        return text.strip()
    found = bottleneck(verdict)
    if found is None:
        return "No bottleneck found in the tested range"
    return (
        f"Bottleneck: {found.get('component', '?')} ({found.get('resource', '?')})"
        f" from {_start(found)}"
    )


def _start(found: dict[str, Any]) -> str:
    """Where the bottleneck starts: users, or in open loop a target rate."""
    rate = found.get("starts_at_rate")
    if fmt.is_number(rate):
        return f"{fmt.rate(rate)} req/s"
    users = found.get("starts_at_users")
    return f"{fmt.count(users)} users" if fmt.is_number(users) else fmt.DASH


def summary(verdict: dict[str, Any]) -> str | None:
    found = bottleneck(verdict)
    text = found.get("summary") if found else None
    return text if isinstance(text, str) and text.strip() else None


def prediction(verdict: dict[str, Any]) -> str | None:
    """What the advice would give, as predicted from the run: one line."""
    found = bottleneck(verdict)
    predicted = found.get("prediction") if found else None
    line = predicted.get("line") if isinstance(predicted, dict) else None
    return f"Predicted: {line}." if isinstance(line, str) and line else None


def evidence(verdict: dict[str, Any]) -> list[str]:
    found = bottleneck(verdict)
    items = found.get("evidence") if found else None
    return [str(e) for e in items] if isinstance(items, list) else []


def facts(verdict: dict[str, Any]) -> list[tuple[str, str]]:
    """The bottleneck as (label, value) pairs; empty when there is none."""
    found = bottleneck(verdict)
    if found is None:
        return []
    return [
        ("component", str(found.get("component", fmt.DASH))),
        ("resource", str(found.get("resource", fmt.DASH))),
        ("starts at", _start(found)),
    ]


def notes(verdict: dict[str, Any]) -> list[str]:
    """The lines after the evidence: other findings, the curve, the endpoints and why
    requests failed."""
    return other_findings(verdict) + curve(verdict) + endpoints(verdict) + error_reasons(verdict)


def error_reasons(verdict: dict[str, Any]) -> list[str]:
    """Why requests failed, per class of error: `tls errors (50): invalid peer
    certificate: UnknownIssuer`."""
    counts: dict[str, int] = {}
    for step in verdict.get("steps", []):
        for name, n in (step.get("errors_by_class") or {}).items():
            counts[name] = counts.get(name, 0) + int(n)
    lines = []
    for name, reasons in (verdict.get("error_reasons") or {}).items():
        n = f" ({counts[name]})" if counts.get(name) else ""
        lines.append(f"{name} errors{n}: {'; '.join(reasons)}")
    return lines


def load_changes(verdict: dict[str, Any]) -> list[str]:
    """Each change of load asked while the run went (load/control.py): `Step 2: 6 users
    from 02:10:05 UTC, set from the terminal`, or `200 req/s` in open loop."""
    lines = []
    for change in verdict.get("load_changes") or []:
        at = time.strftime("%H:%M:%S", time.gmtime(float(change["at"])))
        load = f"{change['rate']:g} req/s" if "rate" in change else f"{change['users']} users"
        lines.append(
            f"Step {int(change['step']) + 1}: {load} from {at} UTC, set from the {change['by']}"
        )
    return lines


def partial_warning(verdict: dict[str, Any]) -> str | None:
    """A verdict rebuilt from the folder of a killed run (recover.py) says so, and what
    the folder lacked."""
    if not verdict.get("partial"):
        return None
    missing = "; ".join(str(m) for m in verdict.get("missing") or []) or "nothing else"
    return (
        "PARTIAL: the run was killed before it finished; this verdict was rebuilt from its "
        f"plan and the requests it recorded. Missing: {missing}."
    )


def short_warning(verdict: dict[str, Any]) -> str | None:
    """Generators on Ray lost mid-run: the load was short of the plan's."""
    short = verdict.get("load_short")
    return short if isinstance(short, str) else None


def generator_warning(verdict: dict[str, Any]) -> str | None:
    generator = verdict.get("generator")
    if not isinstance(generator, dict):
        return None
    if generator.get("saturated"):
        cores = generator.get("cpu_cores_max")
        used = f" (up to {cores:.2f} CPU cores)" if fmt.is_number(cores) else ""
        what = f"the load generator was saturated{used}"
    elif generator.get("host_saturated"):
        what = "the host running the load generator was saturated"
    elif generator.get("starved"):
        what = "the load generator's threads waited for a CPU"
    else:
        return None
    return f"Warning: {what}; the limit measured may be the generator's, not the stack's."


def curve(verdict: dict[str, Any]) -> list[str]:
    """The knee and the scalability fit, in words; empty when the verdict has neither."""
    lines = []
    knee = verdict.get("knee")
    lowest = _lowest_users(verdict)
    if isinstance(knee, dict) and knee.get("at_lowest_load") and lowest is not None:
        rate = knee["throughput_at_knee"]
        lower = (
            "start lower to see it"
            if lowest > 1
            else f"a closed loop has no lighter load: an arrival rate below {rate:.0f} req/s "
            "(an open-loop plan) would show it"
        )
        lines.append(
            f"Knee at or below {lowest} user{'s' if lowest != 1 else ''}, the lowest load "
            f"tested: throughput had stopped scaling near {rate:.0f} req/s already; {lower}"
        )
    elif isinstance(knee, dict) and fmt.is_number(knee.get("load")):
        lines.append(
            f"Knee at {knee['load']:.1f} users (95% interval {knee['ci_low']:.1f}–{knee['ci_high']:.1f}, "
            f"confidence {knee['confidence']:.2f}): throughput stops scaling near "
            f"{knee['throughput_at_knee']:.0f} req/s"
        )
    usl = verdict.get("scalability")
    if isinstance(usl, dict) and fmt.is_number(usl.get("r_squared")) and usl["r_squared"] < MIN_R2:
        lines.append(
            f"Scalability (USL): the law does not fit these steps (R² {usl['r_squared']:.2f}); "
            "no prediction"
        )
    elif isinstance(usl, dict) and fmt.is_number(usl.get("sigma")):
        peak = usl.get("peak_throughput")
        at = usl.get("peak_load")
        where = f" at {at:.1f} users" if fmt.is_number(at) else ""
        top = (
            f"predicted peak {peak:.0f} req/s{where}; "
            if fmt.is_number(peak)
            else "no peak in sight; "
        )
        lines.append(
            f"Scalability (USL): {top}contention σ {usl['sigma']:.3f}, coherency κ {usl['kappa']:.4f}, "
            f"fit R² {usl['r_squared']:.2f}"
        )
    return lines


def _lowest_users(verdict: dict[str, Any]) -> int | None:
    given = [s.get("users") for s in verdict.get("steps") or [] if isinstance(s, dict)]
    users = [u for u in given if isinstance(u, int) and u > 0]
    return min(users) if users else None


def endpoints(verdict: dict[str, Any]) -> list[str]:
    """Per request of the plan: whether its throughput reaches a ceiling, in words."""
    return [
        str(e["summary"])
        for e in verdict.get("endpoints") or []
        if isinstance(e, dict) and e.get("summary")
    ]


def other_findings(verdict: dict[str, Any]) -> list[str]:
    """The bottleneck's confidence, then the findings after it with theirs, in words (every
    finding when there is no bottleneck)."""
    lines = []
    b = bottleneck(verdict)
    if b is not None and fmt.is_number(b.get("confidence")):
        lines.append(f"Confidence {b['confidence']:.2f} (1 when the tier explains all the growth")
        lines[-1] += " and a saturated resource confirms it)"
    # Without a bottleneck, the first finding (a neighbour) is not in the headline's place.
    for f in (verdict.get("findings") or [])[1 if b is not None else 0 :]:
        if isinstance(f, dict) and f.get("name"):
            where = (
                f"{f['starts_at_rate']:g} req/s"
                if fmt.is_number(f.get("starts_at_rate"))
                else f"{f.get('starts_at_users')} users"
            )
            since = "at or below" if f.get("at_lowest_load") else "from"
            lines.append(f"Also: {f['name']} {since} {where} (confidence {f['confidence']:.2f})")
    return lines
