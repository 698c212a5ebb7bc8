"""A real Flask app instrumented with OpenTelemetry (Flask and SQLite instrumentations),
behind real nginx and gunicorn on 127.0.0.1, exporting its spans to the run's OTLP
receiver: the app's tier and its database call come from spans and agree with what the
access logs of the same run say."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from pinchpoint.demo import DemoStack
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint.pipeline import execute
from pinchpoint.plan.model import parse_plan

pytestmark = pytest.mark.timeout(240)
HERE = Path(__file__).resolve().parent


class TracedStack(DemoStack):
    """nginx → gunicorn → the instrumented app of traced_app.py, exporting to `endpoint`."""

    def __init__(self, workdir: Path, endpoint: str) -> None:
        super().__init__(workdir, workers=2)
        self.endpoint = endpoint

    def _server_argv(self) -> list[str]:
        argv = self._gunicorn_argv()
        # Each worker starts its own exporter thread: none may be forked from a preloaded app.
        argv.remove("--preload")
        return [*argv[:-1], "traced_app:app"]

    def _server_env(self) -> dict[str, str]:
        env = self._app_env()
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env["PYTHONPATH"]])
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = self.endpoint
        env["OTEL_BSP_SCHEDULE_DELAY"] = "200"
        return env


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_spans_give_the_app_and_its_database_call_as_tiers(tmp_path: Path) -> None:
    otlp_port = _free_port()
    endpoint = f"http://127.0.0.1:{otlp_port}/v1/traces"
    with TracedStack(tmp_path / "stack", endpoint) as stack:
        text = f"""
[target]
url = "http://127.0.0.1:{stack.nginx_port}"

[load]
lower = 1
upper = 3
step = 2
duration = "3s"
warmup = "0.5s"

[[request]]
path = "/items"

[[component]]
name = "nginx"
calls = ["gunicorn"]
log = {{ path = "{stack.nginx_access_log}", format = "nginx", log_format = {json.dumps(NGINX_FORMAT)} }}

[[component]]
name = "gunicorn"
calls = ["app"]
process = {{ pid_file = "{stack.gunicorn_pid_file}" }}
log = {{ path = "{stack.gunicorn_access_log}", format = "gunicorn", log_format = {json.dumps(GUNICORN_FORMAT)} }}

# Its records come from its spans.
[[component]]
name = "app"

[[otlp]]
listen = "127.0.0.1:{otlp_port}"
settle = "1.5s"
"""
        outcome = execute(parse_plan(text), text, tmp_path / "runs")

    run_dir = outcome.run_dir
    requests = pl.read_parquet(run_dir / "requests.parquet").filter(pl.col("status") == 200)
    tiers = pl.read_parquet(run_dir / "tiers.parquet")
    app = tiers.filter(pl.col("component") == "app")
    sqlite = tiers.filter(pl.col("component") == "app/sqlite")
    # Every answered request has its app span and its database span, under its own id.
    assert app.height >= 0.95 * requests.height > 50
    assert set(app["req_id"].to_list()) <= set(requests["req_id"].to_list())
    assert sqlite.height == app.height
    joined = app.join(tiers.filter(pl.col("component") == "gunicorn"), on="req_id", suffix="_g")
    assert joined.height >= 0.95 * app.height
    # The app's span lies inside gunicorn's logged time, and the query inside the app's.
    ratio = (joined["duration_s"] / joined["duration_s_g"]).median()
    assert 0.5 < ratio <= 1.05, ratio
    assert (app["upstream_s"] <= app["duration_s"]).all()
    assert sqlite["duration_s"].median() <= app["duration_s"].median()

    verdict = outcome.verdict
    assert verdict["calls"]["app"] == ["app/sqlite"]
    # The logs' tiers and the spans' make one chain, entry first.
    assert verdict["tiers"] == ["nginx", "gunicorn", "app", "app/sqlite"]
    for step in verdict["steps"]:
        seen = step["tiers"]
        assert seen["app"]["p50_ms"] <= seen["gunicorn"]["p50_ms"] * 1.05
        assert seen["app/sqlite"]["p50_ms"] <= seen["app"]["p50_ms"]
    collected = json.loads((run_dir / "collection.json").read_text())
    assert collected["calls"] == {"app": ["app/sqlite"]}
    assert collected["components"]["app"]["matched"] == app.height
