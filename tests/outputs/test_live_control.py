"""A run's users changed while it goes: from the terminal (`pinchpoint control`) and from
the live page in headless Chromium, against a real server on loopback; a change without
the run's token (or from another site's page) refused with the load unchanged; the change
in run.json, the verdict, the report and the terminal."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import live_helpers as live
import polars as pl
import pytest

from ok_target import OkTarget
from pinchpoint.rundir import files
from pinchpoint_lab.browser import browser, chromium
from pinchpoint_lab.serving import serving

# Changes are timed against the run's planned end: one test at a time, at normal priority.
pytestmark = pytest.mark.timed

# Which connection (client port) sent each request id, as the server saw them.
SEEN: dict[int, int] = {}
SEEN_LOCK = threading.Lock()


class _Target(OkTarget):
    """2 ms a request; notes the connection each tagged request came on."""

    def do_GET(self) -> None:
        req = parse_qs(urlsplit(self.path).query).get("pp_req")
        if req:
            with SEEN_LOCK:
                SEEN[int(req[0])] = int(self.client_address[1])
        self.answer(200, 0.002)


def _plan(target: int, first_s: float) -> str:
    """2 users for `first_s`, then 8 for a second."""
    return live.staged_plan(
        target, "stage", f'users = 2\nhold = "{first_s}s"', 'users = 8\nhold = "1s"'
    )


@pytest.mark.timeout(120)
def test_the_terminal_changes_the_users_and_a_change_without_the_token_is_refused(
    tmp_path: Path,
) -> None:
    SEEN.clear()
    with serving(_Target) as target, live.run(tmp_path, _plan(target, 5)) as proc:
        url = proc.page_url()
        base, token = live.base_and_token(url)
        live.until(lambda: live.steps_seen(base), 30, "the load's first second")
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
        assert live.steps_seen(base) == {0}  # the load unchanged
        asked_at = time.time()
        assert live.ask_from_terminal(url, "--users", "6") == "Users set to 6 (change 1)"
        output = proc.finished(90)
    folder, run = live.written(tmp_path)
    first, changed = run["steps"]  # the plan's 8 users never ran
    assert (first["users"], "manual" not in first) == (2, True)
    assert (changed["step"], changed["users"], changed["level"]) == (1, 6, 6.0)
    assert changed["manual"]["by"] == "terminal"
    assert asked_at <= changed["manual"]["at"] == changed["start"] <= asked_at + 5
    # Still the planned end: 6 s after the load began, whatever the change.
    assert abs(changed["end"] - first["start"] - 6.0) < 0.5, run["steps"]
    requests = pl.read_parquet(folder / files.REQUESTS)
    by_step = {step: requests.filter(pl.col("step") == step) for step in requests["step"].unique()}
    assert set(by_step) == {0, 1}
    assert by_step[0]["users"].unique().to_list() == [2]
    assert by_step[1]["users"].unique().to_list() == [6]
    assert by_step[1].height > 100
    # Each user keeps its connection: 6 distinct ones send the step's requests.
    ports = {step: {SEEN[int(r)] for r in rows["req_id"]} for step, rows in by_step.items()}
    assert (len(ports[0]), len(ports[1])) == (2, 6)
    [change] = live.valid_verdict(folder)["load_changes"]
    assert (change["step"], change["users"], change["by"]) == (1, 6, "terminal")
    report = (folder / files.REPORT).read_text()
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
        live.run(tmp_path, _plan(target, 30)) as proc,
    ):
        answer, output = live.ask_from_page(page, proc, "control", "control-users", "4")
    assert answer == "asked for 4 users"
    _, run = live.written(tmp_path)
    assert [s["users"] for s in run["steps"]] == [2, 4], output
    assert run["steps"][1]["manual"]["by"] == "page"
    assert re.search(r"Users set to 4 from the page", output), output
