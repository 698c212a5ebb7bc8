"""The comparison as one self-contained page: plotly.js inlined once, no network."""

from __future__ import annotations

from html import escape
from pathlib import Path

from pinchpoint.compare.charts import ladder, over_time, qq
from pinchpoint.compare.fmt import interval, ms, p_value, ratio, share
from pinchpoint.compare.result import UNRESOLVED, ComparisonResult, SideSummary
from pinchpoint.report import shell
from pinchpoint.report.figure import Figure

THIN = ' class="thin"'

CSS = """
.verdict { border-left: 6px solid var(--same); }
.verdict.slower { border-left-color: var(--bad); }
.verdict.faster { border-left-color: var(--good); }
.headline { font-size: 20px; }
.slower .headline { color: var(--bad); }
.faster .headline { color: var(--good); }
.meta { color: var(--muted); font-size: 14px; margin: 4px 0; }
table { margin: 0 0 14px; }
th, td { padding: 4px 12px; }
tr.thin td { color: var(--muted); }
"""


def write_html(result: ComparisonResult, out: Path) -> Path:
    """Write the page to `out` (through a temporary file) and return its path."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    return shell.write_page(Path(out), render_page(result))


def render_page(result: ComparisonResult) -> str:
    title = f"pinchpoint compare · {result.a.label} vs {result.b.label}"
    sections = [_verdict_section(result), _ladder_section(result), _table_section(result)]
    if result.sides is not None:
        a, b = result.sides
        sections.append(
            _section(
                "qq",
                "Quantiles of B against A (above the line: B slower)",
                _figure(qq(result, a, b)),
            )
        )
        sections.append(
            _section("latency-time", "Latency over time", _figure(over_time(result, a, b)))
        )
    return shell.page(title, "pinchpoint compare", sections, CSS)


def _figure(fig: Figure) -> str:
    return shell.figure(fig)


def _section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{section_id}">\n<h2>{escape(title)}</h2>\n{body}\n</section>'


def _direction(result: ComparisonResult) -> str:
    if not result.p99_significant or result.p99_change == 0:
        return ""
    return "slower" if result.p99_change > 0 else "faster"


def _verdict_section(result: ComparisonResult) -> str:
    a, b = result.a, result.b
    sides = "".join(
        f'<p class="meta">{name}: {escape(s.label)} · {escape(s.path)} · '
        f"{s.used:,} successful of {s.requests:,} requests compared</p>"
        for name, s in (("A", a), ("B", b))
    )
    return (
        f'<section class="verdict {_direction(result)}" id="verdict">\n'
        f'<p class="headline">{escape(result.verdict)}</p>\n{sides}\n</section>'
    )


def _ladder_section(result: ComparisonResult) -> str:
    return _section("ladder", "Percentile ladder", _figure(ladder(result)))


def _table_section(result: ComparisonResult) -> str:
    a, b = result.a.label, result.b.label
    head = f"<th>A: {escape(a)} (ms)</th><th>B: {escape(b)} (ms)</th>"
    rows = [
        f'<tr{"" if r.resolved else THIN}><td class="text">'
        f"{r.label}{'' if r.resolved else ' *'}</td><td>{ms(r.a_ms)}</td>"
        f"<td>{ms(r.b_ms)}</td><td>{ratio(r.ratio)}</td></tr>"
        for r in result.ladder
    ]
    ladder_table = (
        f'<table><thead><tr><th class="text">percentile</th>{head}<th>B / A</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if not all(r.resolved for r in result.ladder):
        ladder_table += f'<p class="note">* {escape(UNRESOLVED)}.</p>'
    pct = f"{result.confidence * 100:.0f}%"
    interval_rows = [
        f'<tr><td class="text">{i.label}</td>'
        f"<td>{ms(i.a_ms)} ({interval(i.a_low_ms, i.a_high_ms)})</td>"
        f"<td>{ms(i.b_ms)} ({interval(i.b_low_ms, i.b_high_ms)})</td>"
        f'<td class="text">{"yes" if i.overlap else "no"}</td></tr>'
        for i in result.intervals
    ]
    intervals = (
        f'<table><thead><tr><th class="text">percentile</th>'
        f"<th>A ({pct} interval)</th><th>B ({pct} interval)</th>"
        '<th class="text">overlap</th></tr></thead>'
        f"<tbody>{''.join(interval_rows)}</tbody></table>"
    )
    facts = [
        ("requests compared (successful)", f"{result.a.used:,}", f"{result.b.used:,}"),
        ("requests left out (failed)", f"{result.a.excluded:,}", f"{result.b.excluded:,}"),
        ("mean (ms)", ms(result.a.mean_ms), ms(result.b.mean_ms)),
        ("min – max (ms)", _range(result.a), _range(result.b)),
    ]
    if result.sla_ms is not None:
        facts.append(
            (
                f"slower than the SLA of {ms(result.sla_ms)} ms",
                share(result.a.sla_error_rate),
                share(result.b.sla_error_rate),
            )
        )
    fact_rows = "".join(
        f'<tr><td class="text">{escape(name)}</td><td>{va}</td><td>{vb}</td></tr>'
        for name, va, vb in facts
    )
    fact_table = (
        f'<table><thead><tr><th class="text"></th><th>A: {escape(a)}</th>'
        f"<th>B: {escape(b)}</th></tr></thead><tbody>{fact_rows}</tbody></table>"
    )
    test = (
        f'<p class="meta">Mann–Whitney U test (two-sided): p {_p_text(result.mann_whitney_p)} '
        f"({'the distributions differ' if result.distributions_differ else 'no difference'} "
        f"at α = {result.alpha:g}). Intervals: percentile bootstrap, nearest-rank percentiles.</p>"
    )
    body = "\n".join(
        [f'<div class="scroll">{t}</div>' for t in (ladder_table, intervals, fact_table)] + [test]
    )
    return _section("numbers", "Numbers", body)


def _range(side: SideSummary) -> str:
    return f"{ms(side.min_ms)} – {ms(side.max_ms)}"


def _p_text(value: float) -> str:
    text = p_value(value)
    return text if text.startswith("<") else f"= {text}"
