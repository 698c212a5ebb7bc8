"""`report.html`: one self-contained page (plotly inlined once, no network) per run."""

from __future__ import annotations

from html import escape
from os import PathLike
from pathlib import Path
from typing import Any, cast

from pinchpoint.analyze import sla as slas
from pinchpoint.analyze.sla_record import SlaOutcome, percentile_limits, stored_sla
from pinchpoint.redact import private_files
from pinchpoint.report import fmt, resource_charts, shell, summary, time_charts, users_charts
from pinchpoint.report.figure import Figure
from pinchpoint.report.load import ReportInput, load_run
from pinchpoint.report.profile_section import CSS as PROFILE_CSS
from pinchpoint.report.profile_section import profile_section
from pinchpoint.report.request_table import request_table
from pinchpoint.report.table import StepTable, step_table
from pinchpoint.report.waterfall import waterfall
from pinchpoint.rundir import files
from pinchpoint.rundir.view import RunView, as_view

TIME_KEYS = {"started", "ended", "start", "end", "start_s", "end_s", "started_at", "ended_at"}
TIME_PLOTS = [
    "pp-latency-time", "pp-errors-time", "pp-cpu-time", "pp-memory-time",
    *resource_charts.MORE_PLOTS,
]  # fmt: skip

CSS = """
.meta { margin: 12px 0 0; color: var(--muted); font-size: 14px; }
.verdict { border-left: 6px solid var(--good); }
.verdict.found { border-left-color: var(--bad); }
.headline { font-size: 22px; color: var(--good); }
.found .headline { color: var(--bad); }
.facts { display: flex; flex-wrap: wrap; gap: 4px 28px; margin: 8px 0; }
.facts div { display: flex; gap: 6px; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; font-weight: 600; }
.warning { background: #fff8e1; border: 1px solid #f0d58a; color: var(--warn);
           border-radius: 6px; padding: 8px 12px; margin: 10px 0 0; font-weight: 600; }
th, td { padding: 4px 10px; }
th.group { text-align: center; border-left: 1px solid var(--line); }
tr.bottleneck td { background: #fdecea; font-weight: 600; }
td.met { color: var(--good); font-weight: 700; }
td.broken { color: var(--bad); font-weight: 700; }
.sla { border-left: 6px solid var(--good); }
.sla.broken { border-left-color: var(--bad); }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px;
      padding: 12px; overflow-x: auto; font-size: 13px; }
"""

# Zooming one time chart zooms the others, so latency and resources stay aligned.
SYNC_SCRIPT = """
(function () {
  var plots = %s.map(function (id) { return document.getElementById(id); })
    .filter(function (el) { return el && el.on; });
  var busy = false;
  plots.forEach(function (plot) {
    plot.on("plotly_relayout", function (ev) {
      if (busy) { return; }
      var update = {};
      if ("xaxis.range[0]" in ev) {
        update["xaxis.range"] = [ev["xaxis.range[0]"], ev["xaxis.range[1]"]];
      } else if ("xaxis.range" in ev) {
        update["xaxis.range"] = ev["xaxis.range"];
      } else if (ev["xaxis.autorange"]) {
        update["xaxis.autorange"] = true;
      } else { return; }
      busy = true;
      Promise.all(plots.filter(function (p) { return p !== plot; })
        .map(function (p) { return Plotly.relayout(p, update); }))
        .finally(function () { busy = false; });
    });
  });
})();
"""


@private_files()
def write_report(run_dir: RunView | files.RunFolder | PathLike[str]) -> Path:
    """Write `run_dir/report.html` from the run folder and return its path.

    verdict.json is required; a chart whose data is missing becomes a short note."""
    view = as_view(run_dir)
    return shell.write_page(view.folder / files.REPORT, render_page(load_run(view)))


def render_page(data: ReportInput) -> str:
    """The whole page as a string."""
    verdict = data.verdict
    run_id = _run_id(data)
    outcome, sla_problem = _sla_of(data)
    sections = [
        _verdict_section(data, run_id),
        _sla_section(outcome, sla_problem),
        _users_section(data),
        _percentiles_section(data, outcome),
        _throughput_section(data),
        _waterfall_section(data),
        profile_section(verdict, data.view),
        *_time_sections(data),
        _table_section(verdict),
        _requests_section(verdict),
        _plan_section(data),
        _facts_section(data),
    ]
    body = [section for section in sections if section]
    script = SYNC_SCRIPT % _js_list(TIME_PLOTS)
    css = CSS + PROFILE_CSS
    return shell.page(f"pinchpoint · {run_id}", "pinchpoint report", body, css, script)


def _js_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def _run_id(data: ReportInput) -> str:
    for value in (data.verdict.get("run_id"), data.run.get("run_id")):
        if isinstance(value, str) and value:
            return value
    return data.run_dir.name


def _figure(fig: Figure | None, missing: str, div_id: str | None = None) -> str:
    if fig is None:
        return f'<p class="note">{escape(missing)}</p>'
    return shell.figure(fig, div_id)


def _unavailable(data: ReportInput, name: str, what: str) -> str:
    why = data.problems.get(name, "has no rows")
    return f"{what} not shown: {name} {why}."


def _run_line(data: ReportInput, run_id: str) -> str:
    start = data.start_s()
    end = data.end_s()
    parts = [f"run {escape(run_id)}", f"started {escape(fmt.timestamp(start))}"]
    if start is not None and end is not None:
        parts.append(f"lasted {escape(fmt.duration(end - start))}")
    line = f'<p class="meta">{" · ".join(parts)}</p>'
    partial = summary.partial_warning(data.verdict)
    if partial:
        line += f'\n<p class="warning" id="partial">{escape(partial)}</p>'
    elif aborted := data.verdict.get("aborted"):
        line += f'\n<p class="warning" id="aborted">Aborted: {escape(aborted)}.</p>'
    elif data.run.get("interrupted") or data.verdict.get("interrupted"):
        line += '\n<p class="warning">The run was interrupted: later steps are missing.</p>'
    if changes := summary.load_changes(data.verdict):
        items = "".join(f"<li>{escape(c)}</li>" for c in changes)
        line += f'\n<div id="load-changes"><p>Load changed while the run went:</p><ul>{items}</ul></div>'
    return line


def _verdict_section(data: ReportInput, run_id: str) -> str:
    verdict = data.verdict
    found = summary.bottleneck(verdict) is not None
    lines = [
        f'<section class="verdict{" found" if found else ""}" id="verdict">',
        f'<p class="headline">{escape(summary.headline(verdict))}</p>',
    ]
    text = summary.summary(verdict)
    if text:
        lines.append(f"<p>{escape(text)}</p>")
    if predicted := summary.prediction(verdict):
        lines.append(f'<p class="prediction">{escape(predicted)}</p>')
    facts = summary.facts(verdict)
    if facts:
        lines.append('<dl class="facts">')
        lines += [
            f"<div><dt>{escape(label)}</dt><dd>{escape(value)}</dd></div>" for label, value in facts
        ]
        lines.append("</dl>")
    evidence = summary.evidence(verdict)
    if evidence:
        lines.append("<h2>Evidence</h2>")
        lines.append("<ul>" + "".join(f"<li>{escape(item)}</li>" for item in evidence) + "</ul>")
    curve = summary.notes(verdict)
    if curve:
        lines.append("<ul>" + "".join(f"<li>{escape(item)}</li>" for item in curve) + "</ul>")
    warning = summary.generator_warning(verdict)
    if warning:
        lines.append(f'<p class="warning">{escape(warning)}</p>')
    short = summary.short_warning(verdict)
    if short:
        lines.append(f'<p class="warning" id="load-short">{escape(short)}</p>')
    lines.append(_run_line(data, run_id))
    lines.append("</section>")
    return "\n".join(lines)


def _users_section(data: ReportInput) -> str:
    no_steps = "Latency vs users not shown: the verdict has no steps."
    no_tiers = "No tier times: no tier in the verdict."
    return "\n".join(
        [
            '<section id="latency-users">',
            "<h2>Latency vs users, per tier</h2>",
            _figure(users_charts.latency_vs_users(data.verdict), no_steps),
            _figure(
                users_charts.self_queue_vs_users(data.verdict),
                no_tiers if data.verdict.get("steps") else no_steps,
            ),
            "</section>",
        ]
    )


def _throughput_section(data: ReportInput) -> str:
    return "\n".join(
        [
            '<section id="throughput">',
            "<h2>Throughput vs users</h2>",
            _figure(
                users_charts.throughput_vs_users(data.verdict),
                "Throughput not shown: the verdict has no steps.",
            ),
            "</section>",
        ]
    )


def _percentiles_section(data: ReportInput, outcome: SlaOutcome | None) -> str:
    table = users_charts.step_percentiles(data.steady_digest())
    thresholds = [(f"SLA {name} {limit:g} ms", limit) for name, limit in percentile_limits(outcome)]
    if data.requests is None:
        missing = _unavailable(data, files.REQUESTS, "Percentiles")
    else:
        missing = "Percentiles not shown: no successful response."
    lines = [
        '<section id="percentiles">',
        "<h2>Latency percentiles per step</h2>",
        _figure(users_charts.percentiles_vs_users(table, thresholds), missing),
    ]
    if table is not None:
        fewest, most = int(cast(float, table["n"].min())), int(cast(float, table["n"].max()))
        if fewest < 10_000:
            counts = f"{fewest:,}" if fewest == most else f"{fewest:,} to {most:,}"
            lines.append(
                '<p class="note">Each step\'s steady part, as in the table. p99.9 needs 1,000'
                " responses in a step and p99.99 10,000 to say more than the slowest response;"
                f" these steps have {counts}.</p>"
            )
    lines.append("</section>")
    return "\n".join(lines)


def _sla_of(data: ReportInput) -> tuple[SlaOutcome | None, str | None]:
    """The SLA's outcome the analysis kept in the verdict, or why there is none to show.
    A verdict written before the outcome was kept shows none."""
    try:
        outcome = stored_sla(data.verdict)
    except LookupError:
        return None, None
    except ValueError as exc:
        return None, str(exc)
    if outcome is not None and outcome.problem is not None:
        return outcome, f"{outcome.problem}."
    return outcome, None


def _sla_section(outcome: SlaOutcome | None, problem: str | None) -> str:
    if problem is not None:
        return (
            '<section class="sla broken" id="sla">\n<h2>SLA</h2>\n'
            f'<p class="note">The SLA was not checked: {escape(problem)}</p>\n</section>'
        )
    if outcome is None or not outcome.results:
        return ""
    results = outcome.results
    broken = slas.broken(results)
    rows = []
    for result in results:
        worst = slas.worst_step(result)
        where = (
            f"{result.describe(worst.value)} at {slas.users_text(worst.users)}"
            if worst
            else fmt.DASH
        )
        steps = ", ".join(str(s.users) for s in result.broken_steps) or fmt.DASH
        cls, word = ("broken", "BROKEN") if not result.passed else ("met", "met")
        rows.append(
            f'<tr><td class="text">{escape(result.objective)}</td>'
            f"<td>{escape(result.describe(result.value))}</td><td>{escape(where)}</td>"
            f"<td>{escape(steps)}</td>"
            f'<td class="{cls}">{word}</td></tr>'
        )
    head = (
        '<tr><th class="text">objective</th><th>whole run</th><th>worst step</th>'
        "<th>broken at users</th><th></th></tr>"
    )
    headline = "SLA broken" if broken else "SLA met"
    return "\n".join(
        [
            f'<section class="sla{" broken" if broken else ""}" id="sla">',
            f"<h2>{headline}</h2>",
            "<p class=\"note\">The plan's [sla], over the whole run and at each step's steady"
            " part; latencies of the successful responses.</p>",
            f'<div class="scroll"><table><thead>{head}</thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>",
            "</section>",
        ]
    )


def _waterfall_section(data: ReportInput) -> str:
    fig = waterfall(data.requests, data.tiers, data.verdict, data.run)
    if fig is None:
        return ""
    return "\n".join(
        [
            '<section id="waterfall">',
            "<h2>Slowest requests at the knee</h2>",
            '<p class="note">Each request as the client saw it and, under it, each tier\'s '
            "record of it (from its log or its span), placed where it ran.</p>",
            shell.figure(fig),
            "</section>",
        ]
    )


def _time_sections(data: ReportInput) -> list[str]:
    t0 = data.start_s() or 0.0
    windows = time_charts.step_windows(data.run, data.requests, t0)
    x_range = _time_range(data, t0, windows)
    latency = time_charts.latency_over_time(data.requests, t0, windows, x_range)
    cpu = time_charts.resource_over_time(
        data.resources, data.verdict, "cpu_cores", t0, windows, x_range
    )
    memory = time_charts.resource_over_time(
        data.resources, data.verdict, "rss_bytes", t0, windows, x_range
    )
    errors = time_charts.errors_over_time(data.requests, t0, windows, x_range)
    more = resource_charts.more_over_time(data.resources, data.verdict, t0, windows, x_range)
    if data.requests is None:
        no_errors = _unavailable(data, files.REQUESTS, "Errors over time")
    else:
        no_errors = "No errors: every request got a response below HTTP 400."
    return [
        "\n".join(
            [
                '<section id="latency-time">',
                "<h2>Latency over time</h2>",
                _figure(
                    latency,
                    _unavailable(data, files.REQUESTS, "Latency over time"),
                    TIME_PLOTS[0],
                ),
                "</section>",
            ]
        ),
        "\n".join(
            [
                '<section id="errors">',
                "<h2>Errors over time</h2>",
                _figure(errors, no_errors, TIME_PLOTS[1]),
                "</section>",
            ]
        ),
        "\n".join(
            [
                '<section id="resources">',
                "<h2>Resources over time</h2>",
                _figure(cpu, _unavailable(data, files.RESOURCES, "CPU"), TIME_PLOTS[2]),
                _figure(memory, _unavailable(data, files.RESOURCES, "Memory"), TIME_PLOTS[3]),
                *(_figure(fig, "", div_id) for div_id, fig in more),
                "</section>",
            ]
        ),
    ]


def _time_range(
    data: ReportInput, t0: float, windows: list[time_charts.Window]
) -> tuple[float, float] | None:
    """One x range for every time chart, so they line up."""
    lows, highs = [0.0], []
    if windows:
        lows.append(min(w.start for w in windows))
        highs.append(max(w.end for w in windows))
    extent = data.requests_extent()
    if extent is not None:
        lows.append(extent[0] - t0)
        highs.append(extent[1] - t0)
    if data.resources is not None and data.resources.height:
        lows.append(float(cast(float, data.resources["ts"].min())) - t0)
        highs.append(float(cast(float, data.resources["ts"].max())) - t0)
    end = data.end_s()
    if end is not None:
        highs.append(end - t0)
    if not highs:
        return None
    return (min(lows), max(highs))


def _table_section(verdict: dict[str, Any]) -> str:
    table = step_table(verdict)
    body = _html_table(table) if table.rows else '<p class="note">The verdict has no steps.</p>'
    return "\n".join(
        [
            '<section id="steps">',
            "<h2>Steps</h2>",
            '<p class="note">Latencies in ms; tiers as “p50 / p95”.</p>' if table.rows else "",
            body,
            "</section>",
        ]
    )


def _requests_section(verdict: dict[str, Any]) -> str:
    table = request_table(verdict)
    if not table.rows:
        return ""
    return "\n".join(
        [
            '<section id="requests">',
            "<h2>Per request</h2>",
            '<p class="note">Each named request (flow steps as flow/step) at each load step;'
            " latencies in ms, tiers as “p50 / self p50”.</p>",
            _html_table(table),
            "</section>",
        ]
    )


def _html_table(table: StepTable) -> str:
    groups: list[tuple[str, int]] = []
    for column in table.columns:
        if groups and groups[-1][0] == column.group:
            groups[-1] = (column.group, groups[-1][1] + 1)
        else:
            groups.append((column.group, 1))
    top = "".join(
        f'<th class="group" colspan="{span}">{escape(group)}</th>' for group, span in groups
    )
    labels = "".join(f"<th>{escape(c.label)}</th>" for c in table.columns)
    rows = []
    for i, row in enumerate(table.rows):
        cls = ' class="bottleneck"' if i == table.highlight else ""
        cells = "".join(f"<td>{escape(cell)}</td>" for cell in row)
        rows.append(f"<tr{cls}>{cells}</tr>")
    return (
        '<div class="scroll"><table>'
        f"<thead><tr>{top}</tr><tr>{labels}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody>"
        "</table></div>"
    )


def _plan_section(data: ReportInput) -> str:
    if data.plan_text is None:
        content = f'<p class="note">{escape(_unavailable(data, files.PLAN, "The plan"))}</p>'
    else:
        content = f"<pre>{escape(data.plan_text)}</pre>"
    return f'<section id="plan">\n<h2>Plan</h2>\n{content}\n</section>'


def _facts_section(data: ReportInput) -> str:
    rows = [(key, _fact_value(key, value)) for key, value in _flatten(data.run)]
    if data.tier_records is not None:
        records = ", ".join(f"{name} {n:,}" for name, n in data.tier_records.items())
        rows.append(("tier log records", records or "none"))
    for name, why in sorted(data.problems.items()):
        rows.append((f"not used: {name}", why))
    body = "".join(
        f'<tr><th class="text">{escape(key)}</th><td class="text">{escape(value)}</td></tr>'
        for key, value in rows
    )
    content = f"<table>{body}</table>" if rows else '<p class="note">run.json is empty.</p>'
    return f'<section id="facts">\n<h2>Run</h2>\n{content}\n</section>'


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        items: list[tuple[str, Any]] = []
        for key, inner in value.items():
            items += _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
        return items
    return [(prefix, value)]


def _fact_value(key: str, value: Any) -> str:
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return f"{len(value)} entries (see run.json)"
        return ", ".join(_fact_value("", v) for v in value)
    if value is None:
        return fmt.DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.rsplit(".", 1)[-1] in TIME_KEYS and fmt.is_number(value):
        return f"{value} ({fmt.timestamp(value)})"
    return str(value)
