"""A run's users changed while it goes: from the terminal (`pinchpoint control`) and from
the live page in headless Chromium, against a real server on loopback; a change without
the run's token (or from another site's page) refused with the load unchanged; the change
in run.json, the verdict, the report and the terminal."""

from __future__ import annotations

import json
import os
import re
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
import polars as pl
import pytest

from pinchpoint.rundir import files
from pinchpoint_lab.browser import browser, chromium
from pinchpoint_lab.serving import serving

# Changes are timed against the run's planned end: one test at a time, at normal priority.
pytestmark = pytest.mark.timed

# Which connection (client port) sent each request id, as the server saw them.
SEEN: dict[int, int] = {}
SEEN_LOCK = threading.Lock()


class _Target(BaseHTTPRequestHandler):
    """2 ms a request; notes the connection each tagged request came on."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        req = parse_qs(urlsplit(self.path).query).get("pp_req")
        if req:
            with SEEN_LOCK:
                SEEN[int(req[0])] = int(self.client_address[1])
        time.sleep(0.002)
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


class _Run:
    """`pinchpoint run` going on, its output read into `lines` as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout or []))
        self.reader.start()

    def output(self) -> str:
        """What it printed so far: all of it once it has ended."""
        if self.proc.poll() is not None:
            self.reader.join(10)
        return "".join(self.lines)

    def page_url(self) -> str:
        """The live page's address, as the run printed it."""

        def printed() -> str | None:
            for line in list(self.lines):
                if line.startswith("Live page: "):
                    return line.split()[2].rstrip(",")
            return None

        return str(_until(printed, 60, "the live page's address"))


@contextmanager
def _run(folder: Path, target: int, first_s: float) -> Iterator[_Run]:
    """`pinchpoint run --serve` of 2 users for `first_s`, then 8 for a second."""
    (folder / "plan.toml").write_text(
        f'[target]\nurl = "http://127.0.0.1:{target}"\ntag = true\n\n[load]\nwarmup = "0s"\n\n'
        f'[[load.stage]]\nusers = 2\nhold = "{first_s}s"\n\n'
        '[[load.stage]]\nusers = 8\nhold = "1s"\n\n[[request]]\npath = "/"\n'
    )
    argv = [sys.executable, "-m", "pinchpoint", "run", "plan.toml", "--serve", "127.0.0.1:0",
            "--serve-linger", "0"]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    running = _Run(proc)
    try:
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
        running.reader.join(10)


def _state(base: str) -> dict[str, Any]:
    return dict(httpx.get(f"{base}/state", timeout=5).json())


def _rows_seen(base: str) -> bool:
    return bool(_state(base)["rows"])


def _run_dir(folder: Path) -> Path:
    [run_dir] = (folder / "runs").iterdir()
    return run_dir


@pytest.mark.timeout(120)
def test_the_terminal_changes_the_users_and_a_change_without_the_token_is_refused(
    tmp_path: Path,
) -> None:
    SEEN.clear()
    with serving(_Target) as target, _run(tmp_path, target, first_s=5) as proc:
        url = proc.page_url()
        token = parse_qs(urlsplit(url).query)["token"][0]
        base = url.split("/?")[0]
        _until(lambda: _rows_seen(base), 30, "the load's first second")
        # Refused: no token, a wrong one, the token from another site's page, users past
        # the plan's largest step.
        control = f"{base}/control?users=6&by=terminal"
        assert httpx.post(control, timeout=5).status_code == 401
        wrong = {"Authorization": "Bearer not-the-token"}
        assert httpx.post(control, headers=wrong, timeout=5).status_code == 401
        held = {"Authorization": f"Bearer {token}"}
        elsewhere = held | {"Origin": "http://evil.example"}
        assert httpx.post(control, headers=elsewhere, timeout=5).status_code == 403
        too_many = httpx.post(f"{base}/control?users=9", headers=held, timeout=5)
        assert too_many.status_code == 400
        assert too_many.json() == {"error": "users: 9: from 1 to 8, the plan's largest step"}
        time.sleep(0.5)
        assert {row["step"] for row in _state(base)["rows"]} == {0}  # the load unchanged
        asked_at = time.time()
        done = subprocess.run(
            [sys.executable, "-m", "pinchpoint", "control", url, "--users", "6"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Users set to 6 (change 1)"
        assert proc.proc.wait(90) == 0, proc.output()
        output = proc.output()
    run_dir = _run_dir(tmp_path)
    run = json.loads((run_dir / files.RUN).read_text())
    first, changed = run["steps"]  # the plan's 8 users never ran
    assert (first["users"], "manual" not in first) == (2, True)
    assert (changed["step"], changed["users"], changed["level"]) == (1, 6, 6.0)
    assert changed["manual"]["by"] == "terminal"
    assert asked_at <= changed["manual"]["at"] == changed["start"] <= asked_at + 5
    # Still the planned end: 6 s after the load began, whatever the change.
    assert abs(changed["end"] - first["start"] - 6.0) < 0.5, run["steps"]
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    by_step = {step: requests.filter(pl.col("step") == step) for step in requests["step"].unique()}
    assert set(by_step) == {0, 1}
    assert by_step[0]["users"].unique().to_list() == [2]
    assert by_step[1]["users"].unique().to_list() == [6]
    assert by_step[1].height > 100
    # Each user keeps its connection: 6 distinct ones send the step's requests.
    ports = {step: {SEEN[int(r)] for r in rows["req_id"]} for step, rows in by_step.items()}
    assert (len(ports[0]), len(ports[1])) == (2, 6)
    verdict = json.loads((run_dir / files.VERDICT).read_text())
    schema = json.loads((Path(__file__).parents[2] / "docs" / "verdict.schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(verdict)) == []
    [change] = verdict["load_changes"]
    assert (change["step"], change["users"], change["by"]) == (1, 6, "terminal")
    report = (run_dir / files.REPORT).read_text()
    assert 'id="load-changes"' in report
    at = time.strftime("%H:%M:%S", time.gmtime(change["at"]))
    said = f"Step 2: 6 users from {at} UTC, set from the terminal"
    assert said in report and "6 users, set from the terminal" in report
    assert "Users set to 6 from the terminal" in output
    assert f"Load changed: {said}" in output
    # The step table's users say who set them.
    assert re.search(r"^\s+2\s", output, re.M) and re.search(r"^\s+6 \(terminal\)\s", output, re.M)
    assert "<td>6 (terminal)</td>" in report or ">6 (terminal)<" in report


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (apt: chromium)")
@pytest.mark.timeout(180)
def test_the_live_page_s_control_changes_the_users_in_chromium(tmp_path: Path) -> None:
    with (
        browser(tmp_path / "chromium") as page,
        serving(_Target) as target,
        _run(tmp_path, target, first_s=30) as proc,
    ):
        url = proc.page_url()
        base = url.split("/?")[0]
        page.open(url)  # its token becomes the page's cookie
        shown = "!document.getElementById('control').hidden"
        _until(lambda: page.evaluate(shown), 60, "the page's control")
        page.evaluate(
            "document.getElementById('control-users').value = '4';"
            "document.getElementById('control').requestSubmit()"
        )
        said = "document.getElementById('control-said').textContent"
        assert _until(lambda: page.evaluate(said), 30, "the answer") == "asked for 4 users"
        _until(lambda: any(r["step"] == 1 for r in _state(base)["rows"]), 30, "step 2")
        errors = list(page.errors)
        proc.proc.send_signal(signal.SIGINT)  # the run stops; its folder is written
        proc.proc.wait(90)
        output = proc.output()
    assert errors == [], errors
    run = json.loads((_run_dir(tmp_path) / files.RUN).read_text())
    assert [s["users"] for s in run["steps"]] == [2, 4], output
    assert run["steps"][1]["manual"]["by"] == "page"
    assert re.search(r"Users set to 4 from the page", output), output
