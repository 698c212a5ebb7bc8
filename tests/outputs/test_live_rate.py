"""An open-loop run's rate changed while it goes, from the terminal (`pinchpoint control
--rate`) against a real server on loopback that notes when each request came, and from the
live page's rate field in headless Chromium; a change without the run's token, past the
plan's largest rate or of users refused; the change in run.json, the verdict, the report
and the terminal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jsonschema
import pytest

from pinchpoint.rundir import files
from pinchpoint_lab.browser import browser, chromium
from pinchpoint_lab.serving import serving

# Rates are measured against the clock: one test at a time, at normal priority.
pytestmark = pytest.mark.timed

# When each tagged request reached the server (unix seconds).
ARRIVED: list[float] = []
ARRIVED_LOCK = threading.Lock()


class _Target(BaseHTTPRequestHandler):
    """Answers at once; notes when each tagged request came."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if "pp_req" in parse_qs(urlsplit(self.path).query):
            with ARRIVED_LOCK:
                ARRIVED.append(time.time())
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        return


def _until(condition: Callable[[], Any], within_s: float, what: str) -> Any:
    deadline = time.monotonic() + within_s
    while not (got := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return got


def _received_rate(start: float, end: float) -> float:
    """Requests per second the server received between `start` and `end`, their first
    and last 200 ms left out (a change lands within the scheduler's 20 ms poll)."""
    a, b = start + 0.2, end - 0.2
    with ARRIVED_LOCK:
        n = sum(1 for t in ARRIVED if a <= t < b)
    return n / (b - a)


def _steps_seen(base: str) -> set[int]:
    """The steps the live page's state has rows of."""
    return {int(r["step"]) for r in httpx.get(f"{base}/state", timeout=5).json()["rows"]}


@contextmanager
def _run(
    folder: Path, target: int, first_s: float
) -> Iterator[tuple[subprocess.Popen[str], list[str], str]]:
    """`pinchpoint run --serve` of 50/s for `first_s`, then 200/s for a second: the
    process, its output lines as they come, and its live page's address."""
    (folder / "plan.toml").write_text(
        f'[target]\nurl = "http://127.0.0.1:{target}"\ntag = true\n\n[load]\nwarmup = "0s"\n\n'
        f'[[load.phase]]\nduration = "{first_s}s"\narrival_rate = 50\n\n'
        '[[load.phase]]\nduration = "1s"\narrival_rate = 200\n\n[[request]]\npath = "/"\n'
    )
    argv = [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "--serve", "127.0.0.1:0",
            "--serve-linger", "0"]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []))
    reader.start()
    try:
        url = _until(
            lambda: next((ln.split()[2].rstrip(",") for ln in list(lines)
                          if ln.startswith("Live page: ")), None),
            60, "the live page's address",
        )  # fmt: skip
        yield proc, lines, url
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
        reader.join(10)


@pytest.mark.timeout(120)
def test_the_terminal_changes_an_open_loop_run_s_rate(tmp_path: Path) -> None:
    ARRIVED.clear()
    with serving(_Target) as target, _run(tmp_path, target, first_s=3) as (proc, lines, url):
        token = parse_qs(urlsplit(url).query)["token"][0]
        base = url.split("/?")[0]
        _until(lambda: len(ARRIVED) >= 25, 30, "the load's first half second")
        control = f"{base}/control?rate=200&by=terminal"
        assert httpx.post(control, timeout=5).status_code == 401
        held = {"Authorization": f"Bearer {token}"}
        too_fast = httpx.post(f"{base}/control?rate=201", headers=held, timeout=5)
        assert too_fast.status_code == 400
        assert too_fast.json() == {
            "error": "rate: 201: above 0 and at most 200/s, the plan's largest phase rate"
        }
        users = httpx.post(f"{base}/control?users=3", headers=held, timeout=5)
        assert users.status_code == 409
        assert users.json() == {"error": "users: this run's load is changed by its rate"}
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "control", url, "--rate", "200"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Rate set to 200/s (change 1)"
        assert proc.wait(60) == 0, "".join(lines)
    output = "".join(lines)
    [run_dir] = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    first, changed = run["steps"]  # the plan's second phase never ran
    assert (first["kind"], first["level"], "manual" not in first) == ("rate", 50.0, True)
    assert (changed["step"], changed["kind"], changed["level"]) == (1, "rate", 200.0)
    assert changed["manual"]["by"] == "terminal"
    assert changed["manual"]["at"] == changed["start"] == first["end"]
    # Still the planned end: 4 s after the load began.
    assert abs(changed["end"] - first["start"] - 4.0) < 0.3, run["steps"]
    # The server saw 50/s before the change and 200/s after it.
    before = _received_rate(first["start"], first["end"])
    after = _received_rate(changed["start"], changed["end"])
    assert abs(before - 50) <= 5 and abs(after - 200) <= 20, (before, after)
    # Uniform arrivals: the phase sends rate × its length, every one on time.
    span = changed["end"] - changed["start"]
    assert abs(changed["intended"] - 200 * span) <= 2 and changed["unsent"] == 0, changed
    verdict = json.loads((run_dir / files.VERDICT).read_text())
    schema = json.loads((Path(__file__).parents[2] / "docs" / "verdict.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(verdict)) == []
    [change] = verdict["load_changes"]
    assert (change["step"], change["rate"], change["by"]) == (1, 200.0, "terminal")
    assert "Rate set to 200/s from the terminal" in output
    at = time.strftime("%H:%M:%S", time.gmtime(change["at"]))
    assert f"Load changed: Step 2: 200 req/s from {at} UTC, set from the terminal" in output
    report = (run_dir / files.REPORT).read_text()
    # The timeline's step (its label JSON-escaped in the page's script).
    assert "200.0 req\\u002fs, set from the terminal" in report
    assert ">200.0 (terminal)<" in report  # the step table's target rate


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (apt: chromium)")
@pytest.mark.timeout(180)
def test_the_live_page_s_control_changes_the_rate_in_chromium(tmp_path: Path) -> None:
    ARRIVED.clear()
    with (
        browser(tmp_path / "chromium") as page,
        serving(_Target) as target,
        _run(tmp_path, target, first_s=30) as (proc, lines, url),
    ):
        page.open(url)  # its token becomes the page's cookie
        shown = "!document.getElementById('control-rate-label').hidden"
        _until(lambda: page.evaluate(shown), 60, "the page's rate field")
        assert page.evaluate("document.getElementById('control-users-label').hidden")
        page.evaluate(
            "document.getElementById('control-rate').value = '120';"
            "document.getElementById('control').requestSubmit()"
        )
        said = "document.getElementById('control-said').textContent"
        answer = _until(lambda: page.evaluate(said), 30, "the answer")
        assert answer == "asked for 120 requests/s"
        base = url.split("/?")[0]
        _until(lambda: 1 in _steps_seen(base), 30, "step 2")
        errors = list(page.errors)
        proc.send_signal(signal.SIGINT)  # the run stops; its folder is written
        proc.wait(90)
    assert errors == [], errors
    [run_dir] = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / files.RUN).read_text())
    assert [(s["kind"], s["level"]) for s in run["steps"]] == [("rate", 50.0), ("rate", 120.0)]
    assert run["steps"][1]["manual"]["by"] == "page"
    assert "Rate set to 120/s from the page" in "".join(lines)
