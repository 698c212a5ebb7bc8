"""Requests and log checks shared by the tests of the demo stack's kinds."""

from __future__ import annotations

import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from pinchpoint.collect.logs.reader import TierRow, collect_component
from pinchpoint.logformats import get_parser

RUN = "k1"
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str, method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method)
    with _opener.open(request, timeout=20) as response:
        return response.status, response.read()


def tagged(path: str, req: int) -> str:
    joiner = "&" if "?" in path else "?"
    return f"{path}{joiner}pp_run={RUN}&pp_users=1&pp_req={req}"


def concurrently(url: str, paths: list[str]) -> tuple[float, list[int]]:
    """Sends each path at once, each on its own connection; the seconds all took, statuses."""
    started = time.monotonic()
    with ThreadPoolExecutor(len(paths)) as pool:
        answers = list(pool.map(lambda path: fetch(url + path), paths))
    return time.monotonic() - started, [status for status, _ in answers]


def records(component: dict[str, Any]) -> list[TierRow]:
    """The records of the run RUN in a component's log, every line of it parsed."""
    log = component["log"]
    parser = get_parser(log["format"], log.get("log_format"))
    rows, counts = collect_component(component["name"], Path(log["path"]), parser, RUN, None)
    assert counts.unparseable == 0, (component["name"], counts)
    return rows


def wait_for_lines(path: Path, count: int, timeout_s: float = 5.0) -> None:
    """Waits until path holds count lines with the run's tag (some tiers log a moment later)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count(f"pp_run={RUN}") >= count:
            return
        time.sleep(0.05)


def processes_of(pid_file: Path) -> list[psutil.Process]:
    master = psutil.Process(int(pid_file.read_text()))
    return [master, *master.children(recursive=True)]


def assert_all_gone(procs: list[psutil.Process]) -> None:
    psutil.wait_procs(procs, timeout=5)
    assert [proc.pid for proc in procs if proc.is_running()] == []
