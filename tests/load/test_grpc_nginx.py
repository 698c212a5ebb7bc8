"""gRPC calls through real nginx (`grpc_pass` to a grpcio server, plaintext HTTP/2), in
closed loop (flow steps) and open loop (requests): nginx logs each call's
`X-Pinchpoint` metadata with the documented format, every call the engine recorded is
matched to its nginx line by the tag, and nginx's times are the calls' times."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from grpc_helpers import DELAY_MS, GrpcNginx, Shop, grpc_nginx, open_plan, shop

from pinchpoint import pipeline
from pinchpoint.demo.nginx import nginx_component
from pinchpoint.demo.plan import component_lines
from pinchpoint.logformats.nginx import NGINX_GRPC_FORMAT
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing

pytestmark = [pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing()), pytest.mark.timed]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Shop, GrpcNginx]]:
    folder = tmp_path_factory.mktemp("grpc-nginx")
    with shop(folder) as s, grpc_nginx(folder / "nginx", s.port, NGINX_GRPC_FORMAT) as n:
        yield s, n


def _run(stack: tuple[Shop, GrpcNginx], plan: str, out: Path) -> tuple[pl.DataFrame, dict, dict]:
    """The run's records, run.json and verdict, with nginx as the plan's component."""
    s, n = stack
    component = nginx_component("nginx", [], n.access_log, n.pid_file)
    component["log"] = {**component["log"], "log_format": NGINX_GRPC_FORMAT}  # type: ignore[dict-item]
    text = plan.replace("PORT", str(n.port)).replace("PROTO", str(s.proto))
    text += "\n".join(component_lines([component]))
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, out)
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    tiers = pl.read_parquet(outcome.run_dir / files.TIERS).filter(pl.col("component") == "nginx")
    assert requests["error"].null_count() == requests.height, run.get("error_reasons")
    # Every call has its nginx line: matched by the tag of its metadata, one each.
    calls = requests.filter(~pl.col("endpoint").is_in(_message_endpoints(run)))
    assert tiers["req_id"].n_unique() == tiers.height
    assert set(calls["req_id"].to_list()) <= set(tiers["req_id"].to_list())
    assert tiers.height <= calls.height + 2, (tiers.height, calls.height)
    return calls.join(tiers, on="req_id"), run, outcome.verdict


def _message_endpoints(run: dict) -> list[int]:
    return [i for i, name in enumerate(run["endpoint_names"]) if name.endswith("/message")]


def _close(matched: pl.DataFrame, endpoint: int, ms: float) -> None:
    """nginx's p50 of a call is the engine's, less the few hundred microseconds between."""
    calls = matched.filter(pl.col("endpoint") == endpoint)
    engine_ms = calls["latency_us"].median() / 1000
    nginx_ms = calls["duration_s"].median() * 1000
    assert engine_ms >= ms and nginx_ms >= ms * 0.95, (engine_ms, nginx_ms)
    assert abs(engine_ms - nginx_ms) <= max(3.0, 0.15 * engine_ms), (engine_ms, nginx_ms)


CLOSED = """
[target]
url = "http://127.0.0.1:PORT"
http = "2"

[load]
users = 4
duration = "2s"
warmup = "0s"

[[flow]]
name = "shop"

[[flow.step]]
name = "echo"
grpc = "test.Shop/Echo"
proto = "PROTO"
data = { id = "u${user_index}" }
check = { json = { "$.id" = "u${user_index}" } }

[[flow.step]]
name = "count"
grpc = "test.Shop/Count"
proto = "PROTO"
data = { id = "u${user_index}", n = 2 }
check = { json = { "$" = { len = 2 } } }
"""


def test_closed_loop_calls_are_each_matched_to_their_nginx_line(
    stack: tuple[Shop, GrpcNginx], tmp_path: Path
) -> None:
    matched, run, verdict = _run(stack, CLOSED, tmp_path / "closed")
    assert run["endpoint_names"] == ["shop/echo", "shop/count", "shop/count/message"]
    # A walk is one echo and a two-message stream: about 60 ms, some 30 walks a user.
    echoes = matched.filter(pl.col("endpoint") == 0)
    assert echoes.height >= 60
    assert set(matched["users"].to_list()) == {4}
    assert set(matched["status"].to_list()) == {200}
    _close(matched, 0, DELAY_MS)
    _close(matched, 1, 2 * DELAY_MS)
    named = {e["endpoint"]: e for e in verdict["endpoints"]}
    top = named["shop/echo"]["steps"][-1]
    assert top["tiers"]["nginx"]["count"] == top["requests"]
    assert top["tiers"]["nginx"]["p50_ms"] >= DELAY_MS


OPEN = open_plan(1)


def test_open_loop_calls_are_each_matched_to_their_nginx_line(
    stack: tuple[Shop, GrpcNginx], tmp_path: Path
) -> None:
    matched, run, verdict = _run(stack, OPEN, tmp_path / "open")
    assert run["endpoint_names"][:2] == ["gRPC test.Shop/Echo", "gRPC test.Shop/Count"]
    # 40/s then 80/s for 1 s each, shared by the two requests; an open-loop tag has no users.
    per_step = dict(matched.group_by("step").len().iter_rows())
    assert abs(per_step[0] - 40) <= 2 and abs(per_step[1] - 80) <= 2, per_step
    assert set(matched["users"].to_list()) == {0}
    _close(matched, 0, DELAY_MS)
    _close(matched, 1, 2 * DELAY_MS)
    named = {e["endpoint"]: e for e in verdict["endpoints"]}
    for step in named["gRPC test.Shop/Echo"]["steps"]:
        assert step["tiers"]["nginx"]["count"] == step["requests"]
