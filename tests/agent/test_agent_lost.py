"""An agent that is unreachable, or dies during the run: the run completes with what the
others gave, and the missing agent is named in collection.json and on the terminal."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from agent_helpers import PYTHON_DIR, TOKEN, TOKEN_ENV, toml_tables
from split_stack import APP, loopback_split, plan_text, topology

from pinchpoint.demo import NginxNotFound, find_nginx
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan


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


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_agent_is_reported_and_the_run_completes(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with target() as target_url:
        text = "\n".join(
            [
                f'[target]\nurl = "{target_url}"\n',
                '[load]\nlower = 1\nupper = 1\nduration = "1s"\nwarmup = "0.2s"\n',
                '[[request]]\npath = "/"',
                *toml_tables("component", [{"name": "db", "host": "gone"}]),
                *toml_tables("agent", [{"name": "gone", "url": url, "token_env": TOKEN_ENV}]),
            ]
        )
        outcome = execute(parse_plan(text), text, tmp_path / "runs")
    collection = json.loads((outcome.run_dir / "collection.json").read_text())
    report = collection["agents"]["gone"]
    assert report["status"] == "lost"
    assert "failed at start" in report["problems"][0] and "cannot connect" in report["problems"][0]
    assert collection["components"]["db"]["agent"] == "gone"
    assert "lost" in collection["components"]["db"]["error"]
    assert outcome.warnings == report["problems"]
    assert (outcome.run_dir / "verdict.json").exists()
    assert pl.read_parquet(outcome.run_dir / "requests.parquet").height > 10


def test_an_agent_killed_mid_run_is_reported_and_the_run_completes(tmp_path: Path) -> None:
    try:
        find_nginx()
    except NginxNotFound as e:
        pytest.skip(str(e))
    with loopback_split(tmp_path) as (split, components):
        hosts = {name: "b" for name in APP}  # nginx stays local: collected in-process
        del split.agents["a"]
        plan = tmp_path / "plan.toml"
        text = plan_text(split.url, split.agents, topology(components, hosts), upper=5)
        plan.write_text(text)
        runs = tmp_path / "runs"
        argv = [sys.executable, "-m", "pinchpoint", "run", str(plan), "--runs-dir", str(runs)]
        env = {
            "PYTHONPATH": str(PYTHON_DIR),
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            TOKEN_ENV: TOKEN,
        }
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as run:
            deadline = time.monotonic() + 60
            while not (runs.exists() and any(runs.iterdir())) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.5)  # into the first step
            split.agents["b"].kill()
            stdout, stderr = run.communicate(timeout=240)
    assert run.returncode == 0, stdout.decode()[-3000:] + stderr.decode()[-3000:]
    [run_dir] = list(runs.iterdir())
    collection = json.loads((run_dir / "collection.json").read_text())
    report = collection["agents"]["b"]
    assert report["status"] == "lost"
    assert "failed at stop" in report["problems"][0]
    for name in APP:
        assert collection["components"][name]["agent"] == "b"
        assert collection["components"][name]["matched"] == 0
        assert "lost" in collection["components"][name]["error"]
    requests = pl.read_parquet(run_dir / "requests.parquet")
    answered = requests.filter(pl.col("status") == 200).height
    assert collection["components"]["nginx"]["matched"] == answered > 10
    resources = set(pl.read_parquet(run_dir / "resources.parquet")["component"].to_list())
    assert {"nginx", "host", "generator"} <= resources
    assert not resources & {"gunicorn", "host@b", "agent@b"}
    assert (run_dir / "verdict.json").exists() and (run_dir / "report.html").exists()
    out = " ".join(stdout.decode().split())
    assert "Not collected: agent b" in out and "failed at stop" in out
