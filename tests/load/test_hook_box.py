"""A flow's hook in a box (load/hook_box.py): a hook that spins, exits or kills its
process after 20 good calls ends `pinchpoint run` with the 20 requests it sent, one
`capture` error per user, a message naming the hook, exit code 3 and a folder that
`pinchpoint analyze` reads; a hook that does not exist is refused before anything is
written. Real runs of the command against a server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from load_helpers import http_server

from pinchpoint.load.hook_box import HookBox, HookError, HookStopped
from pinchpoint.rundir import files

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"

HOOKS = """
import os
import signal
import time

CALLS = [0]


def _after_20():
    CALLS[0] += 1
    return CALLS[0] > 20


def spin(request, vars):
    if _after_20():
        while True:
            pass


# The process dies half a second into the call, so that the other user's next call is
# waiting on it by then, however late the host schedules that user.
def exits(request, vars):
    if _after_20():
        time.sleep(0.5)
        os._exit(0)


def killed(request, vars):
    if _after_20():
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)


# Past the 1 GiB cap at once: the allocation is refused before a page is touched.
def hog(request, vars):
    if _after_20():
        return bytearray(2 << 30)


# Grows by 8 MiB at a time, 64 times (512 MiB) at most: past the cap its test sets.
def grows(request, vars):
    held = []
    for _ in range(64):
        held.append(bytearray(8 << 20))


def fine(request, vars):
    request["headers"].append(("X-Call", str(CALLS[0])))
    CALLS[0] += 1
    if request["path"] == "/raise":
        raise KeyError("no key")
"""

PLAN = """
[target]
url = "http://127.0.0.1:{port}"

[load]
users = 2
duration = "4s"
warmup = "0s"
timeout = "1s"
hook = "{hook}"

[[flow]]
name = "hooked"

[[flow.step]]
path = "/a"
hook = true
"""


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "COLUMNS": "200"}
    env.pop("PINCHPOINT_TRACEBACK", None)
    return subprocess.run(
        [sys.executable, "-m", "pinchpoint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _run(tmp_path: Path, hook: str) -> tuple[subprocess.CompletedProcess[str], int, Path | None]:
    (tmp_path / "hooks.py").write_text(HOOKS)
    with http_server() as (port, seen):
        (tmp_path / "plan.toml").write_text(PLAN.format(port=port, hook=hook).lstrip())
        done = _cli(["run", "plan.toml", "--runs-dir", "runs", "--quiet"], tmp_path)
        sent = seen.count()
    folders = list((tmp_path / "runs").iterdir()) if (tmp_path / "runs").exists() else []
    return done, sent, folders[0] if folders else None


@pytest.mark.parametrize(
    ("function", "why"),
    [
        ("spin", "a call did not return within 1 s; its process was stopped"),
        ("exits", "its process exited with status 0 during a call"),
        ("killed", "its process was killed by SIGKILL during a call"),
        (
            "hog",
            "a call needed more than the 1024 MiB of memory a hook may hold; "
            "its process was stopped",
        ),
    ],
)
def test_a_hook_that_spins_exits_or_kills_its_process_ends_the_run_with_what_it_measured(
    tmp_path: Path, function: str, why: str
) -> None:
    done, sent, folder = _run(tmp_path, f"hooks.py:{function}")
    message = f"the hook hooks.py:{function}: {why}; the run stopped there"
    assert done.returncode == 3, done.stderr
    assert message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr and "Fatal Python error" not in done.stderr
    assert folder is not None
    run = json.loads((folder / files.RUN).read_text())
    assert run["stopped"] == message and run["interrupted"]
    # The 20 requests the hook let through were sent and kept; each of the 2 users then
    # waited on the hook and ended with one capture error, never sent.
    assert sent == 20
    requests = pl.read_parquet(folder / files.REQUESTS)
    assert requests.filter(pl.col("status") == 200).height == 20
    failed = requests.filter(pl.col("error").is_not_null())
    assert failed.height == 2 and set(failed["error"]) == {"capture"}
    assert set(failed["status"]) == {0}
    assert any(message.split("; the run")[0] in r for r in run["error_reasons"]["capture"])
    # The step ended soon after the call that broke (its 1 s budget), not at its 4 s.
    [step] = run["steps"]
    assert step["end"] - step["start"] < 3.5
    analyzed = _cli(["analyze", str(folder)], tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr


def test_a_hook_that_does_not_exist_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    done, sent, folder = _run(tmp_path, "hooks.py:nothere")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("plan.toml:9: load.hook: "), done.stderr
    assert "has no function nothere" in done.stderr
    assert sent == 0 and folder is None and not (tmp_path / "runs").exists()


def test_a_boxed_hook_changes_the_request_and_raises_as_the_hook_did(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(HOOKS)
    box = HookBox(f"{tmp_path}/hooks.py:fine", 1.0)
    try:
        request = {"step": 0, "method": "GET", "path": "/", "headers": [], "body": b"\x00\xff"}
        out = box(request, {"user_index": "0"})
        assert out == {
            "method": "GET",
            "path": "/",
            "headers": [("X-Call", "0")],
            "body": b"\x00\xff",
        }
        with pytest.raises(Exception, match="no key") as raised:
            box({**request, "path": "/raise"}, {})
        assert type(raised.value).__name__ == "KeyError"
        assert box.broken is None and box.calls == 2
    finally:
        box.close()
    assert box.process.returncode is not None
    with pytest.raises(HookStopped):
        box(request, {})


def test_a_hook_whose_file_spins_at_import_is_refused_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pinchpoint.load.hook_box as hook_box

    (tmp_path / "stuck.py").write_text("while True:\n    pass\n")
    monkeypatch.setattr(hook_box, "START_BUDGET_S", 1.0)
    with pytest.raises(HookError, match=r"it did not load within 1 s; its process was stopped"):
        HookBox(f"{tmp_path}/stuck.py:sign", 1.0)


def test_a_hook_growing_past_its_memory_cap_is_stopped_naming_the_cap(tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(HOOKS)
    # 100 MiB of data at start (Python and the modules it loads): 60 MiB left to the hook.
    box = HookBox(f"{tmp_path}/hooks.py:grows", 5.0, memory_bytes=160 << 20)
    started = time.monotonic()
    try:
        request = {"step": 0, "method": "GET", "path": "/", "headers": [], "body": b""}
        with pytest.raises(HookStopped) as stopped:
            box(request, {})
        took = time.monotonic() - started
    finally:
        box.close()
    assert str(stopped.value) == (
        f"the hook {tmp_path}/hooks.py:grows: a call needed more than the 160 MiB of memory "
        "a hook may hold; its process was stopped"
    )
    assert box.broken == str(stopped.value)
    # Stopped at its cap, long before its 5 s budget.
    assert took < 2.0, took
    assert box.process.returncode is not None
