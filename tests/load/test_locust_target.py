"""The target-only rule of a locustfile's users, judged by where each HTTP client
connects (load/locust_target.py): a URL that urllib3 reads as another port than
`urlsplit` does, and a redirect from the target to another port, send nothing there and
stop the run, its folder complete with the reason; the same URL read the same way by geventhttpclient goes to the
target. Two real servers on loopback: the target and another one that counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import polars as pl
import pytest
from load_helpers import http_server, serving

from pinchpoint import pipeline
from pinchpoint.load.locust_target import fast_address, requests_address, target_address
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files


@contextmanager
def target(other: int) -> Iterator[tuple[int, list[str]]]:
    """A server on 127.0.0.1 answering 200, or for /redirect a 302 to port `other`."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.1:{other}/away")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as port:
        yield port, seen


def _locustfile(user: str, url: str) -> str:
    return (
        f"from locust import {user}, task, constant\n\n"
        f"class Hit({user}):\n    wait_time = constant(0.05)\n\n"
        f"    @task\n    def hit(self):\n        self.client.get({url!r})\n"
    )


def _plan(port: int, locustfile: Path) -> str:
    return (
        f'[target]\nurl = "http://127.0.0.1:{port}"\n\n'
        f'[load]\nlocustfile = "{locustfile}"\nusers = 2\nduration = "1.5s"\nwarmup = "0s"\n'
    )


def _stopped(text: str, tmp_path: Path) -> str:
    """Why the plan's run stopped, its folder checked complete: run.json with the reason,
    the verdict and the report."""
    outcome = pipeline.execute(parse_plan(text, "x.toml"), text, tmp_path / "runs")
    assert outcome.stopped is not None and outcome.interrupted
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    assert run["stopped"] == outcome.stopped
    assert (outcome.run_dir / files.VERDICT).is_file()
    assert (outcome.run_dir / files.REPORT).is_file()
    return outcome.stopped


def test_a_url_urllib3_reads_as_another_port_sends_nothing_there(tmp_path: Path) -> None:
    with http_server() as (other, other_seen), target(other) as (port, _seen):
        url = f"http://127.0.0.1:{other}\\@127.0.0.1:{port}/"
        # urlsplit reads the target's port in it; urllib3 connects to the other one.
        assert requests_address(url) == ("http", "127.0.0.1", other)
        (tmp_path / "lf.py").write_text(_locustfile("HttpUser", url))
        text = _plan(port, tmp_path / "lf.py")
        stopped = _stopped(text, tmp_path)
        assert other_seen.count() == 0
    # run.json's reason is redacted as every text of the run is: the URL's user info goes.
    assert (
        f"sends to http://<redacted>@127.0.0.1:{port}/, which connects to "
        f"http://127.0.0.1:{other}, off the plan's target" in stopped
    )


@pytest.mark.parametrize("user", ["HttpUser", "FastHttpUser"])
def test_a_redirect_off_the_target_is_not_followed(tmp_path: Path, user: str) -> None:
    with http_server() as (other, other_seen), target(other) as (port, seen):
        (tmp_path / "lf.py").write_text(_locustfile(user, "/redirect"))
        text = _plan(port, tmp_path / "lf.py")
        stopped = _stopped(text, tmp_path)
        assert other_seen.count() == 0
        assert len(seen) >= 1
    assert f"sends to http://127.0.0.1:{other}, off the plan's target" in stopped


def test_geventhttpclient_reads_the_same_url_as_the_target(tmp_path: Path) -> None:
    """FastHttpUser's client reads `A\\@B` as urlsplit does: it connects to the target,
    so its requests are sent and recorded."""
    with http_server() as (other, other_seen), target(other) as (port, seen):
        url = f"http://127.0.0.1:{other}\\@127.0.0.1:{port}/"
        assert fast_address(url) == target_address(f"http://127.0.0.1:{port}")
        (tmp_path / "lf.py").write_text(_locustfile("FastHttpUser", url))
        text = _plan(port, tmp_path / "lf.py")
        outcome = pipeline.execute(parse_plan(text, "x.toml"), text, tmp_path / "runs")
        requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
        assert other_seen.count() == 0
        assert requests.height == len(seen) > 5
        assert requests["error"].null_count() == requests.height
