"""A real Prometheus scraping a real node_exporter every second, both started on loopback
ports of their own with their data in a folder given: for the tests that read resource
series from Prometheus, and for recording the answers the query tests replay."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx

from pinchpoint_lab.ports import end, free_port

NODE_EXPORTERS = ("prometheus-node-exporter", "node_exporter")
# Only what the node_exporter preset reads.
COLLECTORS = ("cpu", "meminfo", "pressure", "stat", "diskstats", "netdev")
START_S = 30.0


class NotStarted(RuntimeError):
    """Prometheus or node_exporter exited, or did not answer in time."""


@dataclass
class Servers:
    prometheus_url: str
    node_exporter: str  # host:port, the `instance` label of its series


def missing() -> str | None:
    """Which of prometheus and node_exporter is not installed; None when both are."""
    if shutil.which("prometheus") is None:
        return "prometheus"
    if not any(shutil.which(name) for name in NODE_EXPORTERS):
        return "node_exporter"
    return None


def _binaries() -> tuple[str, str]:
    prometheus = shutil.which("prometheus")
    exporter = next((p for name in NODE_EXPORTERS if (p := shutil.which(name))), None)
    if prometheus is None or exporter is None:
        raise NotStarted(f"{missing()} is not installed")
    return prometheus, exporter


@contextmanager
def _process(argv: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_at_normal_priority
        )
    try:
        yield proc
    finally:
        end(proc)


def _at_normal_priority() -> None:
    """In the child, before exec: the scheduling a service has, even when a test at idle
    priority starts it (`make test`'s parallel part). There node_exporter, starved, read
    its counters well after each scrape's time, and the rates overshot: 2.2 cores of 2."""
    with suppress(PermissionError):  # raising a priority takes root
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, 0, 0)


def _wait(check: str, until: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until `check` (a URL) answers 200 with something true; raises past `until`."""
    while time.monotonic() < until:
        if proc.poll() is not None:
            raise NotStarted(f"{log.stem} exited {proc.returncode}: {log.read_text()[-2000:]}")
        with suppress(httpx.HTTPError):
            response = httpx.get(check, timeout=2)
            if response.status_code == 200 and (
                "query" not in check or response.json()["data"]["result"]
            ):
                return
        time.sleep(0.2)
    raise NotStarted(f"{check} not ready after {START_S:g}s: {log.read_text()[-2000:]}")


@contextmanager
def prometheus_with_node_exporter(folder: Path) -> Iterator[Servers]:
    """Starts node_exporter and a Prometheus scraping it every second; stops both."""
    prometheus, exporter = _binaries()
    folder.mkdir(parents=True, exist_ok=True)
    node = f"127.0.0.1:{free_port()}"
    config = folder / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: node\n"
        f"    static_configs:\n      - targets: ['{node}']\n"
    )
    listen = f"127.0.0.1:{free_port()}"
    node_argv = [
        exporter,
        f"--web.listen-address={node}",
        "--collector.disable-defaults",
        *(f"--collector.{name}" for name in COLLECTORS),
    ]
    prom_argv = [
        prometheus,
        f"--config.file={config}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address={listen}",
        "--log.level=warn",
    ]
    url = f"http://{listen}"
    with (
        _process(node_argv, folder / "node_exporter.log") as node_proc,
        _process(prom_argv, folder / "prometheus.log") as prom_proc,
    ):
        until = time.monotonic() + START_S
        _wait(f"http://{node}/metrics", until, node_proc, folder / "node_exporter.log")
        _wait(f"{url}/-/ready", until, prom_proc, folder / "prometheus.log")
        query = f'{url}/api/v1/query?query=up{{instance="{node}"}}==1'
        _wait(query, until, prom_proc, folder / "prometheus.log")
        yield Servers(url, node)
