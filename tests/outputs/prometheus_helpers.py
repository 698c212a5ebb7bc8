"""A real Prometheus on loopback, for the tests that read a run's metrics back from it
(scraped, or pushed by remote write)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from pinchpoint_lab.ports import end, free_port

START_S = 30.0


@contextmanager
def prometheus(folder: Path, config: str, *flags: str) -> Iterator[str]:
    """A Prometheus of `config` (prometheus.yml's text) and `flags`, its data in `folder`,
    once it is ready; its URL. Skips without the binary."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip(
            "prometheus is not installed (Debian: apt-get install prometheus, or "
            "`bash scripts/install-system-deps.sh test`)"
        )
    (folder / "prometheus.yml").write_text(config)
    listen = f"127.0.0.1:{free_port()}"
    log = folder / "prometheus.log"
    argv = [
        binary,
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'data'}",
        f"--web.listen-address={listen}",
        *flags,
        "--log.level=warn",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://{listen}"
    try:
        until = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited {proc.returncode}: {log.read_text()[-2000:]}")
            with suppress(httpx.HTTPError):
                if httpx.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > until:
                pytest.fail(f"prometheus not ready after {START_S:g}s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        end(proc)


def query(prometheus: str, promql: str, at: float) -> list[dict[str, Any]]:
    """The instant vector of `promql` at `at` (unix seconds)."""
    got = httpx.get(f"{prometheus}/api/v1/query", params={"query": promql, "time": at})
    assert got.status_code == 200, got.text
    return list(got.json()["data"]["result"])
