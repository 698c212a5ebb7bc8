"""Process selectors: pid files as daemons write them, and selectors that find nothing
warn in collection.json and on the terminal of `pinchpoint run`."""

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pinchpoint.cli import app
from pinchpoint.collect.gather import write_logs
from pinchpoint.collect.resources.sampler import ProcessSelector, ResourceSampler
from pinchpoint.collect.sources.local import LocalCollector
from pinchpoint.demo.errors import StackError
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.postgres import PostgresCluster
from pinchpoint_lab.waits import until

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_pid_of_a_real_postmaster_pid_file() -> None:
    try:
        cluster = PostgresCluster()
        cluster.start()
    except StackError as e:
        pytest.skip(str(e))
    try:
        assert cluster.folder is not None
        pid_file = cluster.folder / "data" / "postmaster.pid"
        assert len(pid_file.read_text().splitlines()) > 1
        selector = ProcessSelector(pid_file=pid_file)
        assert selector.roots() == [cluster.pid]
        with ResourceSampler({"postgres": selector}, interval_s=0.2) as sampler:
            time.sleep(0.5)
        rows = [row for row in sampler.rows() if row["component"] == "postgres"]
        # The postmaster and its helpers (checkpointer, writers, ...).
        assert rows and all(row["processes"] >= 3 for row in rows)
        assert sampler.warnings() == {}
    finally:
        cluster.stop()


def test_the_first_line_of_a_postmaster_pid_shaped_file(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid_file = tmp_path / "postmaster.pid"
    pid_file.write_text(
        f"{sleeper.pid}\n{tmp_path}/data\n1795338900\n5432\n/var/run/postgresql\n"
        "127.0.0.1\n  5432001         3\nready   \n"
    )
    selector = ProcessSelector(pid_file=pid_file)
    assert selector.roots() == [sleeper.pid]
    assert selector.select() == [sleeper.pid]
    pid_file.write_text(f"  {sleeper.pid}  \n")
    assert selector.roots() == [sleeper.pid]
    pid_file.write_text(f"pid {sleeper.pid}\n")
    assert selector.roots() == []


def test_selectors_that_find_nothing_warn_in_collection_json(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=10)
    empty = tmp_path / "empty.pid"
    empty.write_text("\n")
    process = {
        "found": {"pids": [sleeper.pid]},
        "missing": {"pid_file": str(tmp_path / "nginx.pid")},
        "empty": {"pid_file": str(empty)},
        "dead": {"pids": [gone.pid]},
        "nameless": {"name": "no-such-program-pp"},
    }
    components = [{"name": name, "process": spec} for name, spec in process.items()]
    plan = parse_plan(_plan("http://127.0.0.1:9", components))
    collector = LocalCollector(plan.component)
    collector.start("r1", 0.1)
    time.sleep(0.35)
    collector.stop()
    expected = {
        "missing": f"pid_file {tmp_path / 'nginx.pid'} in any sample (the file does not exist)",
        "empty": f"pid_file {empty} in any sample (the file holds no pid)",
        "dead": f"pids {gone.pid} in any sample (no such process)",
        "nameless": "name 'no-such-program-pp' in any sample (no process has that name)",
    }
    assert len(collector.problems) == len(expected)
    for problem, (name, says) in zip(collector.problems, expected.items(), strict=True):
        assert problem.startswith(f"{name}: no process found for {says}")
    collected = write_logs([collector], "r1", tmp_path, [])
    assert json.loads((tmp_path / "collection.json").read_text()) == collected
    assert collected["warnings"] == collector.problems
    entries = collected["components"]
    assert sorted(entries) == sorted(expected)
    for name in expected:
        assert entries[name]["warnings"] == [p for p in collector.problems if p.startswith(name)]
        assert entries[name]["lines"] == 0


def test_a_selector_that_finds_nothing_in_some_samples_says_how_many(tmp_path: Path) -> None:
    pid_file = tmp_path / "app.pid"
    sampler = ResourceSampler({"app": ProcessSelector(pid_file=pid_file)}, interval_s=0.1)
    proc = subprocess.Popen(["sleep", "60"])
    try:
        pid_file.write_text(f"{proc.pid}\n")
        with sampler:
            # Samples with the process, then samples without it, however slowly the host
            # schedules the sampler's thread.
            assert until(lambda: _app_samples(sampler, found=True) >= 2)
            proc.kill()
            proc.wait(timeout=10)
            assert until(lambda: _app_samples(sampler, found=False) >= 2)
    finally:
        proc.kill()
    [warning] = sampler.warnings().values()
    assert _app_samples(sampler, found=True) >= 2
    assert f"app: no process found for pid_file {pid_file} in " in warning
    assert f"pid {proc.pid} is not running" in warning
    assert " of " in warning and "any sample" not in warning


def _app_samples(sampler: ResourceSampler, found: bool) -> int:
    """The samples of `app` that found its process (or found none)."""
    rows = [row for row in sampler.rows() if row["component"] == "app"]
    return sum(1 for row in rows if bool(row["processes"]) == found)


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def target() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _plan(url: str, components: list[dict]) -> str:
    lines = [
        f'[target]\nurl = "{url}"\n',
        '[load]\nusers = 1\nduration = "1.5s"\nwarmup = "0.2s"\nthink_time = "20ms"\n',
        '[[request]]\npath = "/"\n',
    ]
    for c in components:
        ((key, value),) = c["process"].items()
        lines.append(f'[[component]]\nname = "{c["name"]}"\nprocess.{key} = {json.dumps(value)}\n')
    return "\n".join(lines)


def test_pinchpoint_run_warns_of_a_pid_file_naming_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "gunicorn.pid"
    with target() as url:
        components = [{"name": "gunicorn", "process": {"pid_file": str(pid_file)}}]
        (tmp_path / "plan.toml").write_text(_plan(url, components))
        result = CliRunner().invoke(
            app,
            ["run", str(tmp_path / "plan.toml"), "--runs-dir", str(tmp_path / "runs"), "-q"],
            env={"COLUMNS": "400"},  # a long tmp path is not wrapped mid-way
        )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"gunicorn: no process found for pid_file {pid_file} in any sample" in said
    [run_dir] = (tmp_path / "runs").iterdir()
    collected = json.loads((run_dir / "collection.json").read_text())
    [warning] = collected["components"]["gunicorn"]["warnings"]
    assert warning.startswith(f"gunicorn: no process found for pid_file {pid_file}")
    assert collected["warnings"] == [warning]
