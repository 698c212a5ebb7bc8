"""The report of a real demo run, opened in headless chromium: it renders every chart, draws a
real screenshot and logs nothing to the console.

Chromium (Debian's, 2025) prints every console message of the page, whatever its level, as
`INFO:CONSOLE` on stderr, and an uncaught exception or rejected promise as such a line
starting "Uncaught". The page logs nothing when all is well, so any console line fails the
test; the first test checks that a broken page is caught that way."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pinchpoint.analyze import analyze
from pinchpoint.report.html import write_report

DEMO_RUN = Path(__file__).parents[1] / "data" / "runs" / "demo-pool2"
CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
# A 1300 × 3000 screenshot of a page with no chart is about 17 kB.
MIN_SCREENSHOT_BYTES = 100_000

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def chromium(url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            # Timers and promises run before the page is captured, so late errors show.
            "--virtual-time-budget=10000",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def console_lines(stderr: str) -> list[str]:
    """The page's console messages and uncaught errors in chromium's log."""
    return [
        line
        for line in stderr.splitlines()
        if re.search(r":CONSOLE[(:\]]", line) or "Uncaught" in line
    ]


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def screenshot(url: str, tmp: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    shot = tmp / "report.png"
    done = chromium(url, tmp, f"--screenshot={shot}", "--window-size=1300,3000")
    return shot, done


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("demo") / "demo-pool2"
    shutil.copytree(DEMO_RUN, run_dir)
    analyze(run_dir)
    return write_report(run_dir)


def test_the_console_check_catches_a_broken_page(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><p>broken</p><script>"
        'console.error("deliberate console error");'
        "setTimeout(function () { missingFunction(); }, 100);"
        "</script></body></html>"
    )
    _shot, done = screenshot(broken.as_uri(), tmp_path)
    found = console_lines(done.stderr)
    assert any("deliberate console error" in line for line in found), done.stderr
    assert any("Uncaught ReferenceError: missingFunction" in line for line in found), done.stderr

    clean = tmp_path / "clean.html"
    clean.write_text("<!DOCTYPE html><html><body><p>clean</p></body></html>")
    _shot, done = screenshot(clean.as_uri(), tmp_path)
    assert console_lines(done.stderr) == []  # chromium's own noise is not taken for the page's


def test_demo_report_screenshot_without_console_errors(demo_report: Path, tmp_path: Path) -> None:
    shot, done = screenshot(demo_report.resolve().as_uri(), tmp_path)
    assert console_lines(done.stderr) == []
    assert shot.is_file(), done.stderr
    assert png_size(shot) == (1300, 3000)
    assert shot.stat().st_size > MIN_SCREENSHOT_BYTES


def test_demo_report_renders_every_chart(demo_report: Path, tmp_path: Path) -> None:
    page = demo_report.read_text(encoding="utf-8")
    charts = page.count('class="plotly-graph-div"')
    # Latency and self/queue time vs users, percentiles, throughput, the slowest requests'
    # waterfall, latency, CPU and memory over time; the demo run had no error, so no errors
    # chart.
    assert charts == 8
    assert "No errors: every request got a response below HTTP 400." in page
    done = chromium(demo_report.resolve().as_uri(), tmp_path, "--dump-dom")
    assert console_lines(done.stderr) == []
    dom = done.stdout
    assert dom.count('class="plot-container') == charts
    assert dom.count('class="main-svg"') >= charts
    # Drawn by plotly.js: the knee and the bottleneck marks, the USL curve's legend entry,
    # the percentiles' legend.
    assert "knee 2.1 users" in dom
    assert "gunicorn from 3 users" in dom
    assert "USL fit (R² 0.99)" in dom
    for name in ("p50", "p90", "p99.9", "p99.99"):
        assert f">{name}<" in dom
