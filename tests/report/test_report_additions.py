"""The report's percentiles per step, errors over time, knee, USL curve and SLA section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fake_run import STEPS, make_verdict

from pinchpoint.analyze.sla import check_sla
from pinchpoint.analyze.sla_record import SlaOutcome
from pinchpoint.plan.sla import sla_of_plan_text
from pinchpoint.report import time_charts, users_charts
from pinchpoint.report.html import write_report
from pinchpoint.report.load import load_run, steady_requests

SLA = '\n[sla]\np50_ms = 30\np99_ms = 60\n"p99.9_ms" = 1500\nerror_rate = 0.01\n'


def _page(run_dir: Path) -> str:
    return write_report(run_dir).read_text(encoding="utf-8")


def _section(page: str, section_id: str) -> str:
    start = page.index(f'id="{section_id}"')
    return page[start : page.index("</section>", start)]


def test_steady_requests_leave_out_each_steps_warm_up(run_dir: Path) -> None:
    data = load_run(run_dir)
    assert data.requests is not None
    requests = data.requests.collect()
    run = dict(data.run, warmup_s=0.5)
    steady = steady_requests(requests, run)
    starts = {s["step"]: s["start"] for s in run["steps"]}
    first = steady.group_by("step").agg(pl.col("start_us").min()).sort("step")
    for step, start_us in first.iter_rows():
        assert start_us >= (starts[step] + 0.5) * 1e6
    assert 0.7 * requests.height < steady.height < 0.8 * requests.height
    # Without step windows, every request.
    assert steady_requests(requests, {}).height == requests.height
    # A scan cuts the same requests.
    assert (
        steady_requests(data.requests, run).collect().sort("req_id").equals(steady.sort("req_id"))
    )


def test_percentiles_per_step_are_the_successful_responses(run_dir: Path) -> None:
    data = load_run(run_dir)
    assert data.requests is not None
    requests = data.requests.collect()
    table = users_charts.step_percentiles(steady_requests(requests, data.run))
    assert table is not None
    assert table["users"].to_list() == [users for users, *_ in STEPS]
    # The 11 timeouts of the last step are left out.
    assert table["n"].to_list() == [n - errors for _u, n, errors, *_ in STEPS]
    # The report's own digest of the scan gives the same table.
    assert users_charts.step_percentiles(data.steady_digest()).equals(table)
    ok = requests.filter((pl.col("step") == 4) & pl.col("error").is_null())
    expected = np.percentile(ok["latency_us"].to_numpy() / 1000, [50, 90, 95, 99, 99.9, 99.99])
    got = table.filter(pl.col("step") == 4).select("p50", "p90", "p95", "p99", "p99.9", "p99.99")
    assert got.row(0) == pytest.approx(tuple(expected))
    fig = users_charts.percentiles_vs_users(table, [("SLA p99 60 ms", 60.0)])
    assert fig is not None
    assert [t["name"] for t in fig.data] == ["p50", "p90", "p95", "p99", "p99.9", "p99.99"]
    assert fig.axes["yaxis"]["type"] == "log"
    assert [s["label"]["text"] for s in fig.layout["shapes"]] == ["SLA p99 60 ms"]


def test_report_has_the_percentiles_section(run_dir: Path) -> None:
    section = _section(_page(run_dir), "percentiles")
    assert "Latency percentiles per step" in section
    assert '"name":"p99.99"' in section
    assert "these steps have 381 to 762." in section


def test_errors_over_time_by_class_per_second(run_dir: Path) -> None:
    requests = pl.DataFrame(
        {
            "step": [0, 0, 0, 0, 1, 1],
            "users": [2, 2, 2, 2, 4, 4],
            "start_us": [100_000, 200_000, 1_500_000, 1_600_000, 1_700_000, 2_100_000],
            "latency_us": [1000] * 6,
            "status": [503, 200, 0, 404, 503, 0],
            "error": [None, None, "timeout", None, None, "connect_refused"],
        },
        schema_overrides={"status": pl.UInt16},
    )
    fig = time_charts.errors_over_time(requests, 0.0, [], None)
    assert fig is not None
    bars = {t["name"]: (list(t["x"]), list(t["y"])) for t in fig.data}
    # Transport errors first, then statuses in order.
    assert list(bars) == ["timeout", "connect_refused", "HTTP 404", "HTTP 503"]
    assert bars["HTTP 503"] == ([0.5, 1.5], [1, 1])
    assert bars["timeout"] == ([1.5], [1])
    assert bars["connect_refused"] == ([2.5], [1])
    assert fig.layout["barmode"] == "stack"
    assert "5 failed of 6 requests" in fig.layout["title"]["text"]
    ok = requests.filter(pl.col("status") == 200)
    assert time_charts.errors_over_time(ok, 0.0, [], None) is None


def test_report_errors_section(run_dir: Path) -> None:
    page = _page(run_dir)
    section = _section(page, "errors")
    assert "Errors over time by class: 11 failed of 3,414 requests" in section
    assert '"name":"timeout"' in section
    assert 'id="pp-errors-time"' in section  # zooms with the other time charts
    table = pq.read_table(run_dir / "requests.parquet")
    clean = table.set_column(
        table.schema.get_field_index("error"), "error", pa.nulls(table.num_rows, pa.string())
    ).set_column(
        table.schema.get_field_index("status"),
        "status",
        pa.array(np.full(table.num_rows, 200), pa.uint16()),
    )
    pq.write_table(clean, run_dir / "requests.parquet")
    section = _section(_page(run_dir), "errors")
    assert "No errors: every request got a response below HTTP 400." in section


def test_knee_and_usl_curve_on_the_charts(verdict: dict[str, Any]) -> None:
    latency = users_charts.latency_vs_users(verdict)
    throughput = users_charts.throughput_vs_users(verdict)
    assert latency is not None and throughput is not None
    for fig in (latency, throughput):
        shapes = fig.layout["shapes"]
        labels = [s["label"]["text"] for s in shapes if s.get("label", {}).get("text")]
        assert "knee 4.0 users" in labels
        band = [s for s in shapes if s["type"] == "rect"]
        assert [(s["x0"], s["x1"]) for s in band] == [(3.96, 4.15)]
    curve = next(t for t in throughput.data if t["name"].startswith("USL fit"))
    assert curve["name"] == "USL fit (R² 0.80)"
    n, x = np.asarray(curve["x"]), np.asarray(curve["y"])
    assert (n.min(), n.max()) == pytest.approx((2, 32))
    usl = verdict["scalability"]
    lam, sigma, kappa = usl["lambda"], usl["sigma"], usl["kappa"]
    assert x == pytest.approx(lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)))
    assert x.max() == pytest.approx(usl["peak_throughput"], rel=1e-3)


def test_no_knee_no_curve(verdict: dict[str, Any]) -> None:
    verdict["knee"] = None
    verdict["scalability"] = None
    throughput = users_charts.throughput_vs_users(verdict)
    assert throughput is not None
    assert [t["name"] for t in throughput.data] == ["throughput", "error rate"]
    assert throughput.layout["title"]["text"] == "Throughput vs users"
    assert not [s for s in throughput.layout.get("shapes", []) if s["type"] == "rect"]


def _keep_sla(run_dir: Path, table: str) -> None:
    """The plan's [sla] checked as the analysis does, kept in the fake run's verdict."""
    plan = run_dir / "plan.toml"
    plan.write_text(plan.read_text() + table)
    objectives = sla_of_plan_text(plan.read_text())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    verdict["sla"] = SlaOutcome(check_sla(objectives, run_dir)).to_json()
    (run_dir / "verdict.json").write_text(json.dumps(verdict))


def test_report_shows_the_sla_the_analysis_kept(run_dir: Path) -> None:
    assert 'id="sla"' not in _page(run_dir)  # the verdict has no SLA
    _keep_sla(run_dir, SLA)
    page = _page(run_dir)
    section = _section(page, "sla")
    assert '<section class="sla broken" id="sla">' in page
    assert "SLA broken" in section
    assert '<tr><td class="text">p99 ≤ 60 ms</td>' in section
    assert '<td class="broken">BROKEN</td>' in section
    assert '<td class="met">met</td>' in section  # p99.9 ≤ 1500 ms
    assert "<td>16, 32</td>" in section  # p50 broken at 16 and 32 users
    ids = ["verdict", "sla", "latency-users", "percentiles", "throughput", "latency-time"]
    ids += ["errors", "resources", "steps", "plan", "facts"]
    positions = [page.index(f'id="{i}"') for i in ids]
    assert positions == sorted(positions)
    # Thresholds as lines on the percentile chart.
    assert "SLA p99 60 ms" in _section(page, "percentiles")


def test_the_plan_is_not_parsed_for_the_sla(run_dir: Path) -> None:
    """An [sla] the verdict does not hold is not the report's to check, even a bad one."""
    plan = run_dir / "plan.toml"
    plan.write_text(plan.read_text() + "\n[sla]\np99ms = 5\n")
    assert 'id="sla"' not in _page(run_dir)


def test_fake_verdict_matches_what_analyze_fits() -> None:
    """fake_run's knee and USL fit are the analysis's, so the charts show real shapes."""
    from pinchpoint.analyze.knee import find_knee
    from pinchpoint.analyze.usl import fit_usl

    users = [s[0] for s in STEPS]
    throughput = [s[3] for s in STEPS]
    knee = find_knee(users, throughput, [s[4] for s in STEPS])
    usl = fit_usl(users, throughput)
    assert knee is not None and usl is not None
    verdict = make_verdict()
    assert verdict["knee"]["load"] == pytest.approx(knee.load, abs=0.01)
    assert verdict["scalability"]["sigma"] == pytest.approx(usl.sigma, rel=1e-3)
    json.dumps(verdict)


def test_sla_without_requests_is_a_note(run_dir: Path) -> None:
    verdict = json.loads((run_dir / "verdict.json").read_text())
    verdict["sla"] = SlaOutcome(problem="requests.parquet not found").to_json()
    (run_dir / "verdict.json").write_text(json.dumps(verdict))
    (run_dir / "requests.parquet").unlink()
    section = _section(_page(run_dir), "sla")
    assert "The SLA was not checked: requests.parquet not found." in section
