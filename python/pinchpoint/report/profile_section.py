"""The report's section on the profiled step: per Python tier, the top functions by own
and total time (verdict.json `profile`) and the flame graph of its stacks (profile.json)."""

from __future__ import annotations

from html import escape
from typing import Any

from pinchpoint.report import fmt
from pinchpoint.report.flame import flame_svg
from pinchpoint.rundir.view import RunView

CSS = """
svg.flame { display: block; margin: 8px 0 4px; }
svg.flame text { fill: #1b1b1b; pointer-events: none; }
svg.flame rect:hover { stroke: #1b1b1b; stroke-width: 1; }
table.hot td.share { text-align: right; }
"""


def profile_section(verdict: dict[str, Any], view: RunView) -> str:
    """The section, or "" when the run took no profile."""
    summary = verdict.get("profile")
    if not isinstance(summary, dict):
        return ""
    stored = view.profile or {}
    lines = ['<section id="profile">', "<h2>Hot functions (py-spy)</h2>"]
    for problem in summary.get("problems") or []:
        lines.append(f'<p class="warning">{escape(str(problem))}</p>')
    found = stored.get("tiers")
    tiers: dict[str, Any] = found if isinstance(found, dict) else {}
    for tier, top in (summary.get("tiers") or {}).items():
        lines += _tier(tier, top, tiers.get(tier) or {}, summary.get("step"))
    lines.append("</section>")
    return "\n".join(lines)


def _tier(tier: str, top: dict[str, Any], stored: dict[str, Any], step: object) -> list[str]:
    start, end = top.get("start"), top.get("end")
    span = (
        f" over {fmt.duration(end - start)}" if fmt.is_number(start) and fmt.is_number(end) else ""
    )
    lines = [
        f"<h3>{escape(tier)}</h3>",
        f'<p class="note">{fmt.count(top.get("samples"))} samples at step {escape(str(step))}'
        f"{escape(span)}: the functions by their own time (innermost frame) and by their "
        "total time (with callees; a function whose time all goes to one callee is left "
        "out).</p>",
        _table(top),
    ]
    if fmt.is_number(top.get("sampler_cpu_s")):
        lines.append(
            f'<p class="note">Sampling cost: py-spy used {top["sampler_cpu_s"]:.2f} '
            f"CPU-seconds{escape(span)}.</p>"
        )
    stacks = [(str(s), int(n)) for s, n in stored.get("stacks") or []]
    svg = flame_svg(stacks, f"flame graph of {tier}")
    lines.append(svg if svg is not None else '<p class="note">No stack was sampled.</p>')
    return lines


def _table(top: dict[str, Any]) -> str:
    by_self, by_total = top.get("by_self") or [], top.get("by_total") or []
    rows = []
    for i in range(max(len(by_self), len(by_total))):
        own = by_self[i] if i < len(by_self) else None
        total = by_total[i] if i < len(by_total) else None
        rows.append("<tr>" + _cells(own, "self_share") + _cells(total, "total_share") + "</tr>")
    return (
        '<table class="hot"><thead><tr><th>by own time</th><th>share</th>'
        "<th>by total time</th><th>share</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _cells(entry: dict[str, Any] | None, key: str) -> str:
    if entry is None:
        return "<td></td><td></td>"
    return (
        f"<td><code>{escape(str(entry.get('function')))}</code></td>"
        f'<td class="share">{escape(fmt.percent(entry.get(key)))}</td>'
    )
