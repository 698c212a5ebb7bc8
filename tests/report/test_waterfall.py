"""The waterfall of the slowest requests at the knee, drawn from a recorded run: each
request's client bar and its tiers' records placed where they ran."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl

from pinchpoint.report.html import write_report
from pinchpoint.report.load import load_run
from pinchpoint.report.waterfall import knee_step, waterfall

RUN = Path(__file__).resolve().parents[1] / "data" / "runs" / "demo-cpu24"


def test_the_slowest_requests_of_the_heaviest_step_are_drawn_with_their_tiers() -> None:
    data = load_run(RUN)
    step = knee_step(data.verdict)
    assert step is not None and step["users"] == 9  # no knee: the heaviest step
    fig = waterfall(data.requests, data.tiers, data.verdict, data.run, count=3)
    assert fig is not None
    assert data.requests is not None and data.tiers is not None
    bars = {trace["y"][0]: (trace["base"][0], trace["x"][0]) for trace in fig.data}
    clients = {label: bar for label, bar in bars.items() if label.endswith("· client")}
    assert len(clients) == 3
    slowest = (
        data.requests.collect()
        .filter(pl.col("step") == 4, pl.col("status") < 400)
        .join(data.tiers.select("req_id").unique(), on="req_id", how="semi")
        .sort("latency_us", descending=True)
    )
    req_id = int(slowest["req_id"][0])
    latency_ms = slowest["latency_us"][0] / 1000
    assert bars[f"request {req_id} · client"] == (0.0, latency_ms)
    placed = {
        tier: bars[f"request {req_id} · {tier}"]
        for tier in data.tiers.filter(pl.col("req_id") == req_id)["component"]
    }
    assert set(placed) == {"nginx", "gunicorn", "app"}
    for start, length in placed.values():
        # Within the client's time, give or take the logs' clocks (nginx: whole ms).
        assert start >= -1.5 and start + length <= latency_ms + 1.5
    # gunicorn stamps whole seconds: its record ends with nginx's, its caller's.
    nginx, gunicorn = placed["nginx"], placed["gunicorn"]
    assert gunicorn[0] + gunicorn[1] == nginx[0] + nginx[1]
    assert gunicorn[0] >= nginx[0]


def test_the_report_has_the_waterfall_section(tmp_path: Path) -> None:
    run = shutil.copytree(RUN, tmp_path / "run")
    page = write_report(run).read_text()
    assert 'id="waterfall"' in page and "Slowest requests at the knee" in page


def test_no_waterfall_without_tier_records() -> None:
    data = load_run(RUN)
    assert waterfall(data.requests, None, data.verdict, data.run) is None
    assert data.tiers is not None
    assert waterfall(data.requests, data.tiers.clear(), data.verdict, data.run) is None
