"""A `pinchpoint run --serve` going on, its output read as it comes: for the tests and the
benches that watch a run's live page or change its load while it goes."""

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
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jsonschema

from pinchpoint.rundir import files
from pinchpoint_lab.browser import Page

SCHEMA = Path(__file__).parents[2] / "docs" / "verdict.schema.json"


def until(condition: Callable[[], Any], within_s: float, what: str, every_s: float = 0.05) -> Any:
    """What `condition` gave once it was true, polled every `every_s`; fails past `within_s`."""
    deadline = time.monotonic() + within_s
    while not (got := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)
    return got


class ServingRun:
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
        """The live page's address with its token, as the run printed it."""

        def printed() -> str | None:
            for line in list(self.lines):
                if line.startswith("Live page: "):
                    return line.split()[2].rstrip(",")
            return None

        return str(until(printed, 60, "the live page's address"))

    def finished(self, within_s: float) -> str:
        """All it printed, once it has ended by itself, exit 0, within `within_s`."""
        assert self.proc.wait(within_s) == 0, self.output()
        return self.output()


@contextmanager
def run(
    folder: Path, plan: str, *flags: str, serve: str = "127.0.0.1:0", linger_s: int = 0
) -> Iterator[ServingRun]:
    """`pinchpoint run plan.toml --serve` of `plan` in `folder`; ended (SIGTERM) with the
    block if it still goes."""
    (folder / "plan.toml").write_text(plan)
    argv = [sys.executable, "-m", "pinchpoint", "run", "plan.toml", *flags, "--serve", serve,
            "--serve-linger", str(linger_s)]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    running = ServingRun(proc)
    try:
        yield running
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(60)
        running.reader.join(10)


def staged_plan(target: int, table: str, *loads: str) -> str:
    """A plan of GET / on `target`, tagged, under each of `loads` in turn: the bodies of
    its `[[load.<table>]]` tables."""
    staged = "".join(f"[[load.{table}]]\n{load}\n\n" for load in loads)
    return (
        f'[target]\nurl = "http://127.0.0.1:{target}"\ntag = true\n\n[load]\nwarmup = "0s"\n\n'
        f'{staged}[[request]]\npath = "/"\n'
    )


def ask_from_page(
    page: Page, running: ServingRun, shown: str, field: str, value: str, hidden: str = ""
) -> tuple[str, str]:
    """Opens the live page; once its element `shown` shows (and `hidden` is hidden), sets
    `field` to `value` and submits the control; once step 2 shows, stops the run (its
    folder is written): what the page answered and what the run printed. Fails on an error
    in the page's console."""
    page.open(running.page_url())  # its token becomes the page's cookie
    until(lambda: page.evaluate(f"!document.getElementById('{shown}').hidden"), 60, shown)
    if hidden:
        assert page.evaluate(f"document.getElementById('{hidden}').hidden")
    page.evaluate(
        f"document.getElementById('{field}').value = '{value}';"
        "document.getElementById('control').requestSubmit()"
    )
    said = "document.getElementById('control-said').textContent"
    answer = until(lambda: page.evaluate(said), 30, "the answer")
    base, _ = base_and_token(running.page_url())
    until(lambda: 1 in steps_seen(base), 30, "step 2")
    errors = list(page.errors)
    running.proc.send_signal(signal.SIGINT)
    running.proc.wait(90)
    assert errors == [], errors
    return str(answer), running.output()


def ask_from_terminal(url: str, *flags: str) -> str:
    """What `pinchpoint control URL FLAGS` said, once it exited 0."""
    done = subprocess.run(
        [sys.executable, "-m", "pinchpoint", "control", url, *flags],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def written(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The one run folder under `folder`/runs and its run.json."""
    [run_dir] = (folder / "runs").iterdir()
    return run_dir, dict(json.loads((run_dir / files.RUN).read_text()))


def base_and_token(url: str) -> tuple[str, str]:
    """The live page's base address and the run's token, from the address it printed."""
    return url.split("/?")[0], parse_qs(urlsplit(url).query)["token"][0]


def steps_seen(base: str) -> set[int]:
    """The steps the live page's state has rows of."""
    return {int(r["step"]) for r in httpx.get(f"{base}/state", timeout=5).json()["rows"]}


def valid_verdict(run: Path) -> dict[str, Any]:
    """The run folder's verdict, checked against docs/verdict.schema.json."""
    verdict = json.loads((run / files.VERDICT).read_text())
    schema = json.loads(SCHEMA.read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(verdict)) == []
    return dict(verdict)
