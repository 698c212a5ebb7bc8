"""A real Flask app instrumented with OpenTelemetry (Flask and SQLite instrumentations),
behind real nginx and gunicorn on 127.0.0.1, exporting its spans to the run's OTLP
receiver: the app's tier and its database call come from spans and agree with what the
access logs of the same run say."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pinchpoint.demo import DemoStack
from pinchpoint.logformats.gunicorn import GUNICORN_FORMAT
from pinchpoint.logformats.nginx import NGINX_FORMAT
from pinchpoint.pipeline import RunOutcome, execute
from pinchpoint.plan.model import parse_plan
from pinchpoint_lab.env import FANOUT_CALLEES_ENV, FANOUT_PATH, FANOUT_WAIT_ENV
from pinchpoint_lab.neighbour import CpuHog
from pinchpoint_lab.traced import (
    GATEWAY_APP,
    SERVICE_APP,
    TracedService,
    TracedStack,
    otlp_endpoint,
    otlp_listen,
)

# Stacks whose callees sleep go with the timed tests, beside the parallel ones at low
# priority; the one beside a busy core runs alone, after them.
pytestmark = pytest.mark.timeout(240)
WAITING, LOADING = pytest.mark.timed, pytest.mark.serial
HERE = Path(__file__).resolve().parent


def _traced_app(workdir: Path, endpoint: str, **options: Any) -> TracedStack:
    """nginx → gunicorn → traced_app.py's app, exporting to `endpoint`."""
    return TracedStack(workdir, endpoint, "app", "traced_app:app", pythonpath=[HERE], **options)


def _components(stack: DemoStack, app: str = "app") -> str:
    """The logs' tiers (nginx → gunicorn) and the app, whose records come from its spans."""
    nginx_format, gunicorn_format = json.dumps(NGINX_FORMAT), json.dumps(GUNICORN_FORMAT)
    return f"""
[[component]]
name = "nginx"
calls = ["gunicorn"]
log = {{ path = "{stack.nginx_access_log}", format = "nginx", log_format = {nginx_format} }}

[[component]]
name = "gunicorn"
calls = ["{app}"]
process = {{ pid_file = "{stack.gunicorn_pid_file}" }}
log = {{ path = "{stack.gunicorn_access_log}", format = "gunicorn", log_format = {gunicorn_format} }}

[[component]]
name = "{app}"
"""


@WAITING
def test_spans_give_the_app_and_its_database_call_as_tiers(tmp_path: Path) -> None:
    listen = otlp_listen()
    with _traced_app(tmp_path / "stack", otlp_endpoint(listen)) as stack:
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
listen = "{listen}"
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


def _svc2(workdir: Path, endpoint: str, sleep_ms: float) -> TracedService:
    """The second service under gunicorn with one worker: its calls queue under load."""
    env = {"TRACED_SERVICE": "svc2", "SVC2_SLEEP_MS": str(sleep_ms)}
    return TracedService(workdir, endpoint, "svc2", "traced_app:svc2", env=env, pythonpath=[HERE])


def _fan_out_run(where: Path, mode: str, hog: float) -> RunOutcome:
    """One run of the fan-out stack, with `hog` cores of busy loops beside it."""
    listen = otlp_listen()
    endpoint = otlp_endpoint(listen)
    neighbour = CpuHog(cores=hog, max_seconds=120) if hog else nullcontext()
    with neighbour, _svc2(where / "svc2", endpoint, sleep_ms=10) as svc2:
        env = {"SVC2_URL": svc2.url, "TRACED_APP_ROWS": "10000"}
        with _traced_app(where / "stack", endpoint, workers=4, env=env) as stack:
            text = f"""
[target]
url = "http://127.0.0.1:{stack.nginx_port}"

[load]
lower = 1
upper = 4
step = 3
duration = "3s"
warmup = "0.5s"

[[request]]
path = "/fanout?mode={mode}"
{_components(stack)}
[[otlp]]
listen = "{listen}"
settle = "1.5s"
"""
            return execute(parse_plan(text), text, where / "runs")


@pytest.mark.parametrize(
    ("mode", "hog"),
    [
        pytest.param("seq", 0.0, marks=WAITING),
        pytest.param("par", 0.0, marks=WAITING),
        pytest.param("seq", 1.0, marks=LOADING),
    ],
)
def test_a_slow_callee_of_a_fan_out_is_named_and_parallel_calls_count_once(
    tmp_path: Path, mode: str, hog: float
) -> None:
    """With `hog` cores of busy loops beside the stack, the host's CPU is nearly full, yet
    svc2's own time stays flat: its one worker, not the CPU, is still the limit."""
    for attempt in range(2):
        outcome = _fan_out_run(tmp_path / f"run{attempt}", mode, hog)
        # Beside the hog, the generator itself may be starved of a core, and the verdict
        # then rightly refuses the run: that is this machine, not the stack; once more.
        if not (hog and outcome.verdict.get("generator", {}).get("starved")):
            break

    tiers = pl.read_parquet(outcome.run_dir / "tiers.parquet")
    wide = (
        tiers.filter(pl.col("component").str.starts_with("app"))
        .pivot(on="component", index="req_id", values="duration_s", aggregate_function="sum")
        .join(
            tiers.filter(pl.col("component") == "app").select("req_id", "upstream_s"), on="req_id"
        )
        .drop_nulls()
    )
    assert wide.height > 100
    children = wide["app/sqlite"] + wide["app/svc2"]
    longest = wide.select(pl.max_horizontal("app/sqlite", "app/svc2")).to_series()
    if mode == "seq":
        # One call after the other: the app waited on the sum of the two.
        assert ((wide["upstream_s"] - children).abs() < 0.002).mean() > 0.95
    else:
        # Side by side: the union of the two, at least the longer, less than their sum.
        assert (
            (wide["upstream_s"] >= longest - 1e-6) & (wide["upstream_s"] <= children + 1e-6)
        ).all()
        # The query ran while the call waited: most of it is not counted a second time.
        overlap = (children - wide["upstream_s"]).median()
        assert overlap > 0.5 * wide["app/sqlite"].median()

    verdict = outcome.verdict
    assert verdict["calls"]["app"] == ["app/sqlite", "app/svc2"]
    assert verdict["calls"]["app/svc2"] == ["svc2"]
    # svc2's one worker is the limit: calls to it wait in its queue, which its own span
    # cannot show and the app's call to it does.
    assert verdict["bottleneck"]["component"] == "svc2", verdict["headline"]
    assert verdict["bottleneck"]["resource"] == "worker_pool", verdict["headline"]
    assert "about 1 at once" in verdict["headline"]
    if hog:  # the neighbour is a finding of its own, beside the stack's limit
        assert any(f["component"] == "neighbours" for f in verdict["findings"])
    growth = verdict["steps"][-1]["tiers"]["svc2"]["queue_p50_ms"]
    assert growth > verdict["steps"][0]["tiers"]["svc2"]["queue_p50_ms"] + 10


def _parallel_run(where: Path) -> RunOutcome:
    """The gateway of pinchpoint_lab/fanout_app.py calls svc-a (four workers) and svc-b
    (one) side by side for each request; both sleep 10 ms, so calls queue for svc-b alone."""
    listen = otlp_listen()
    endpoint = otlp_endpoint(listen)
    wait = {FANOUT_WAIT_ENV: "10"}
    with (
        TracedService(where / "a", endpoint, "svc-a", SERVICE_APP, 4, env=wait) as a,
        TracedService(where / "b", endpoint, "svc-b", SERVICE_APP, 1, env=wait) as b,
    ):
        env = {FANOUT_CALLEES_ENV: f"{a.url} {b.url}"}
        with TracedStack(where / "stack", endpoint, "gateway", GATEWAY_APP, 4, env=env) as stack:
            text = f"""
[target]
url = "http://127.0.0.1:{stack.nginx_port}"

[load]
lower = 1
upper = 4
step = 3
duration = "3s"
warmup = "0.5s"

[[request]]
path = "{FANOUT_PATH}"
{_components(stack, "gateway")}
[[otlp]]
listen = "{listen}"
settle = "1.5s"
"""
            return execute(parse_plan(text), text, where / "runs")


@WAITING
def test_parallel_get_calls_are_told_apart_by_their_callees_and_the_slow_one_is_named(
    tmp_path: Path,
) -> None:
    """Instrumented as the OpenTelemetry docs show, every call is a client span named
    `GET` with no peer.service: the server span that answers it names its callee."""
    outcome = _parallel_run(tmp_path)
    tiers = pl.read_parquet(outcome.run_dir / "tiers.parquet")
    assert set(tiers["component"].unique()) == {
        "nginx", "gunicorn", "gateway", "gateway/svc-a", "gateway/svc-b", "svc-a", "svc-b",
    }  # fmt: skip
    wide = (
        tiers.filter(pl.col("component").str.starts_with("gateway/"))
        .pivot(on="component", index="req_id", values="upstream_s", aggregate_function="sum")
        .join(
            tiers.filter(pl.col("component") == "gateway").select("req_id", "upstream_s"),
            on="req_id",
        )
        .drop_nulls()
    )
    assert wide.height > 100
    # The gateway waited on the union of its two calls: the longer, less than their sum.
    calls = wide["gateway/svc-a"] + wide["gateway/svc-b"]
    longest = wide.select(pl.max_horizontal("gateway/svc-a", "gateway/svc-b")).to_series()
    assert ((wide["upstream_s"] >= longest - 1e-6) & (wide["upstream_s"] <= calls + 1e-6)).all()

    verdict = outcome.verdict
    assert verdict["calls"]["gateway"] == ["gateway/svc-a", "gateway/svc-b"]
    assert verdict["calls"]["gateway/svc-b"] == ["svc-b"]
    first, last = (step["tiers"] for step in (verdict["steps"][0], verdict["steps"][-1]))
    # Each callee's queue is its own calls' wait beyond its span: svc-b's grows, svc-a's not.
    assert last["svc-b"]["queue_p50_ms"] > first["svc-b"]["queue_p50_ms"] + 10
    assert last["svc-a"]["queue_p50_ms"] < first["svc-a"]["queue_p50_ms"] + 5
    bottleneck = verdict["bottleneck"]
    assert bottleneck["component"] == "svc-b", verdict["headline"]
    assert any("waited for svc-b" in line for line in bottleneck["evidence"]), bottleneck
