from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from plotly.offline import get_plotlyjs
from rich.console import Console

from pinchpoint.compare import compare
from pinchpoint.terminal.comparison import render_comparison

MakeRun = Callable[..., Path]  # the make_run fixture


@pytest.fixture
def page(make_run: MakeRun, tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    a = np.round(rng.lognormal(np.log(4000), 0.4, 5000)).astype(np.int64)
    b = np.round(rng.lognormal(np.log(6000), 0.4, 5000)).astype(np.int64)
    result = compare(make_run("before", a), make_run("after", b), tmp_path / "out" / "cmp.html", 20)
    assert result.html == tmp_path / "out" / "cmp.html"
    return result.html


def test_page_is_self_contained(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert html.count(get_plotlyjs()[:300]) == 1  # plotly.js inlined, and once
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert not re.search(r"<link[^>]*\bhref\s*=", html, re.IGNORECASE)
    assert html.count('class="plotly-graph-div"') == 3  # ladder, QQ, time
    ids = ["verdict", "ladder", "numbers", "qq", "latency-time"]
    positions = [html.index(f'id="{i}"') for i in ids]
    assert positions == sorted(positions)
    assert '"type":"log"' in html
    assert "y = x (no change)" in html
    assert "B is slower at p99" in html
    assert "slower than the SLA of 20.0 ms" in html
    assert "B / A" in html
    assert not list(page.parent.glob(".*.tmp"))


def test_page_numbers_match_the_result(make_run: MakeRun, tmp_path: Path) -> None:
    a = np.random.default_rng(1).permutation(np.arange(1, 10_001))
    result = compare(make_run("a", a), make_run("b", a * 2), tmp_path / "p.html", 9.5)
    html = result.html.read_text(encoding="utf-8") if result.html else ""
    assert '<tr><td class="text">p99</td><td>9.90</td><td>19.8</td><td>2.00×</td></tr>' in html
    assert "<td>5.00%</td><td>52.50%</td>" in html
    assert "p &lt; 0.001" in html or "p < 0.001" in html


def test_terminal_rendering(make_run: MakeRun) -> None:
    a = np.random.default_rng(1).permutation(np.arange(1, 10_001))
    result = compare(make_run("before", a), make_run("after", a * 2), None, 9.5)
    console = Console(record=True, width=300, color_system=None)
    render_comparison(result, console)
    text = console.export_text()
    assert "A: before (10,000 of 10,000 requests compared)" in text
    assert re.search(r"p99\.99\s+10\.00\s+20\.0\s+2\.00×", text)
    assert re.search(r"p99\s+9\.90 \(9\.\d\d – 9\.\d\d\)\s+19\.8 \(.*\)\s+no", text)
    assert "Slower than the SLA of 9.50 ms: A 5.00%, B 52.50%" in text
    assert "Mann–Whitney U: p < 0.001 (the distributions differ at α = 0.05)" in text
    assert result.verdict in text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_page_renders_in_headless_chromium_without_errors(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    run = subprocess.run(
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
            "--enable-logging=stderr",
            "--v=0",
            f"--screenshot={shot}",
            "--window-size=1200,2000",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.is_file(), run.stderr[-2000:]
    assert shot.stat().st_size > 50_000  # a blank page is a few kB
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, "\n".join(console)
    assert "Uncaught" not in run.stderr
