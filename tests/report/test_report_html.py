from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from fake_run import HEADLINE, RUN_ID, START_S, STEPS, TIERS, make_verdict
from plotly.offline import get_plotlyjs

from pinchpoint.report.html import write_report
from pinchpoint.report.time_charts import MAX_POINTS, sample_requests


def _rewrite_verdict(run_dir: Path, verdict: dict[str, Any]) -> None:
    (run_dir / "verdict.json").write_text(json.dumps(verdict))


def test_report_is_one_offline_page(run_dir: Path) -> None:
    out = write_report(run_dir)
    assert out == run_dir / "report.html"
    page = out.read_text(encoding="utf-8")
    assert len(page.encode()) > 1_000_000
    assert page.count(get_plotlyjs()[:300]) == 1  # plotly.js inlined, and once
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"<link[^>]*\bhref\s*=", page, re.IGNORECASE)
    assert "@import" not in page
    assert page.count('class="plotly-graph-div"') == 9  # with the slowest requests' waterfall
    assert not list(run_dir.glob(".*.tmp"))


def test_report_content(run_dir: Path) -> None:
    page = write_report(run_dir).read_text(encoding="utf-8")
    verdict_section = page[page.index('id="verdict"') : page.index('id="latency-users"')]
    assert HEADLINE in verdict_section
    assert f"run {RUN_ID} · started 2026-11-22 10:15:00 UTC · lasted 10.4 s" in verdict_section
    assert "interrupted" not in verdict_section
    assert "<dd>worker_pool</dd>" in page
    assert "<dd>8 users</dd>" in page
    assert "<li>app time p50 stays at 10.1 ms from 2 to 32 users</li>" in page
    for tier in TIERS:
        assert f'<th class="group" colspan="2">{tier}</th>' in page or f">{tier}</th>" in page
        assert f'"name":"{tier} p50"' in page  # a line in the latency chart
    for users, *_ in STEPS:
        assert f"<tr><td>{users}</td>" in page or f'<tr class="bottleneck"><td>{users}</td>' in page
        assert f"{users} users" in page  # step band on the time charts
    assert '<tr class="bottleneck"><td>8</td><td>381.0</td>' in page
    assert "<td>11 (1.5%)</td>" in page
    assert "<td>83.9 / 96.0</td>" in page
    assert "gunicorn from 8 users" in page  # the bottleneck marker
    assert "all 3,414 requests" in page
    assert "8 host CPUs" in page
    assert "app 3,403, gunicorn 3,403, nginx 3,403" in page


def test_interrupted_run_is_flagged(run_dir: Path) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    run["interrupted"] = True
    (run_dir / "run.json").write_text(json.dumps(run))
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "The run was interrupted" in page


def test_documented_run_json_without_step_windows(run_dir: Path) -> None:
    (run_dir / "run.json").write_text(
        json.dumps({"run_id": RUN_ID, "start": START_S, "end": START_S + 10.4})
    )
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "started 2026-11-22 10:15:00 UTC · lasted 10.4 s" in page
    for users, *_ in STEPS:
        assert f'"text":"{users} users"' in page  # step bands, from the requests


def test_run_facts(run_dir: Path) -> None:
    page = write_report(run_dir).read_text(encoding="utf-8")
    facts = page[page.index('id="facts"') :]
    assert "bench-1" in facts
    assert "1795342500.0 (2026-11-22 10:15:00 UTC)" in facts
    assert '<td class="text">no</td>' in facts  # interrupted
    assert "5 entries (see run.json)" in facts
    assert "log_marks.nginx.offset" in facts


def test_sections_in_order(run_dir: Path) -> None:
    page = write_report(run_dir).read_text(encoding="utf-8")
    ids = ["verdict", "latency-users", "throughput", "latency-time", "resources", "steps"]
    ids += ["plan", "facts"]
    positions = [page.index(f'id="{i}"') for i in ids]
    assert positions == sorted(positions)


def test_plan_and_data_text_are_escaped(run_dir: Path) -> None:
    verdict = make_verdict()
    verdict["bottleneck"]["evidence"].append("<img src=x onerror=alert(1)>")
    _rewrite_verdict(run_dir, verdict)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&quot;plan&quot;)&lt;/script&gt; &amp; friends" in page
    assert '<script>alert("plan")' not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page


def test_missing_requests_gives_a_note(run_dir: Path) -> None:
    (run_dir / "requests.parquet").unlink()
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "Latency over time not shown: requests.parquet not found." in page
    assert page.count('class="plotly-graph-div"') == 5
    assert "CPU over time" in page


def test_only_the_verdict_is_required(run_dir: Path) -> None:
    for name in ("requests.parquet", "resources.parquet", "tiers.parquet"):
        (run_dir / name).unlink()
    for name in ("run.json", "plan.toml"):
        (run_dir / name).unlink()
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert HEADLINE in page
    assert "CPU not shown: resources.parquet not found." in page
    assert "Memory not shown: resources.parquet not found." in page
    assert "The plan not shown: plan.toml not found." in page
    assert page.count('class="plotly-graph-div"') == 3  # the charts from the verdict


def test_damaged_files_give_notes(run_dir: Path) -> None:
    (run_dir / "requests.parquet").write_bytes(b"not a parquet file")
    (run_dir / "run.json").write_text("{")
    pl.DataFrame({"ts": [1.0]}).write_parquet(run_dir / "resources.parquet")
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "Latency over time not shown: requests.parquet unreadable" in page
    assert "CPU not shown: resources.parquet lacks columns component, cpu_cores" in page
    assert "not used: run.json" in page


def test_missing_verdict_is_an_error(run_dir: Path) -> None:
    (run_dir / "verdict.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"verdict\.json"):
        write_report(run_dir)


def test_no_bottleneck_and_saturated_generator(run_dir: Path) -> None:
    verdict = make_verdict()
    verdict["bottleneck"] = None
    verdict["headline"] = "No bottleneck in the tested range (2 to 32 users)"
    verdict["generator"] = {"saturated": True, "cpu_cores_max": 3.97}
    _rewrite_verdict(run_dir, verdict)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert '<p class="headline">No bottleneck in the tested range (2 to 32 users)</p>' in page
    assert 'class="verdict found"' not in page
    assert "load generator was saturated (up to 3.97 CPU cores)" in page
    assert "from 8 users" not in page
    assert 'class="bottleneck"' not in page


def test_zero_steps(run_dir: Path) -> None:
    verdict = make_verdict()
    verdict["steps"] = []
    _rewrite_verdict(run_dir, verdict)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "Latency vs users not shown: the verdict has no steps." in page
    assert "Throughput not shown: the verdict has no steps." in page
    # The percentiles and the time charts, from the requests and resources.
    assert page.count('class="plotly-graph-div"') == 5


def test_no_tiers(run_dir: Path) -> None:
    verdict = make_verdict()
    verdict["tiers"] = []
    for step in verdict["steps"]:
        step["tiers"] = {}
    _rewrite_verdict(run_dir, verdict)
    page = write_report(run_dir).read_text(encoding="utf-8")
    assert "No tier times: no tier in the verdict." in page
    assert page.count('class="plotly-graph-div"') == 8


def test_sampling_keeps_errors_and_the_tail() -> None:
    rng = np.random.default_rng(1)
    n = 60_000
    latency = rng.integers(1_000, 2_000, n)
    latency[::1000] = 900_000  # 60 slow requests
    error = [None] * n
    for i in range(5, n, 5000):
        error[i] = "timeout"
    requests = pl.DataFrame(
        {
            "step": np.repeat(np.arange(3), n // 3).astype(np.uint32),
            "users": np.repeat([2, 4, 8], n // 3).astype(np.uint32),
            "start_us": np.arange(n, dtype=np.int64) * 100,
            "latency_us": latency,
            "status": [0 if e else 200 for e in error],
            "error": error,
        }
    )
    shown, note = sample_requests(requests)
    assert shown.height == MAX_POINTS
    assert shown["error"].drop_nulls().len() == 12
    assert (shown["latency_us"] == 900_000).sum() == 60
    assert note.startswith("20,000 of 60,000 requests")
    small, note = sample_requests(requests.head(100))
    assert small.height == 100
    assert note == "all 100 requests"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_report_renders_in_a_headless_browser(run_dir: Path, tmp_path: Path) -> None:
    out = write_report(run_dir)
    dom = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            out.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert dom.count('class="plot-container') == 9
    assert "main-svg" in dom
    assert "gunicorn from 8 users" in dom  # the marker's label, drawn by plotly.js
