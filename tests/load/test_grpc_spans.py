"""gRPC calls traced by the server's OpenTelemetry instrumentation: the engine's
`traceparent` gives each span its request id, and the `baggage` it sends, copied onto the
spans by the baggage span processor, their load level (a gRPC path carries no query for
the tag). The spans become the service's tier, one record per call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from grpc_helpers import Shop
from grpc_helpers import shop as start_shop
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.grpc import server_interceptor
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from pinchpoint import pipeline
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.traced import otlp_endpoint, otlp_listen

SERVICE = "shop"


# One exporter per run: its kept-alive connection to a receiver that has closed would
# wait out its retries.
@pytest.fixture
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Shop, str]]:
    listen = otlp_listen()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
    exporter = OTLPSpanExporter(endpoint=otlp_endpoint(listen))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    interceptor = server_interceptor(tracer_provider=provider)
    try:
        with start_shop(tmp_path_factory.mktemp("grpc"), [interceptor]) as shop:
            yield shop, listen
    finally:
        provider.shutdown()


def _plan(shop: Shop, listen: str, load: str) -> str:
    return f"""
[target]
url = "http://127.0.0.1:{shop.port}"
http = "2"

[load]
{load}
warmup = "0s"

[[request]]
grpc = "test.Shop/Echo"
proto = "{shop.proto}"
data = {{ id = "traced" }}

[[component]]
name = "{SERVICE}"

[[otlp]]
listen = "{listen}"
settle = "1s"
"""


@pytest.mark.parametrize(
    ("load", "users"),
    [
        ('lower = 1\nupper = 3\nstep = 2\nduration = "1s"', {1, 3}),
        ('phase = [{ duration = "1s", arrival_rate = 30 }]', {0}),
    ],
    ids=["closed", "open"],
)
def test_each_call_is_its_span_with_the_request_id_and_the_load_level(
    traced: tuple[Shop, str], tmp_path: Path, load: str, users: set[int]
) -> None:
    shop, listen = traced
    text = _plan(shop, listen, load)
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, tmp_path / "runs")
    run_dir = outcome.run_dir
    requests = pl.read_parquet(run_dir / files.REQUESTS)
    tiers = pl.read_parquet(run_dir / files.TIERS).filter(pl.col("component") == SERVICE)
    assert requests.height >= 20 and requests["error"].null_count() == requests.height
    # One server span per call, under the call's own request id and load level.
    assert sorted(tiers["req_id"].to_list()) == sorted(requests["req_id"].to_list())
    joined = tiers.join(requests, on="req_id", suffix="_engine")
    assert set(joined["users"].to_list()) == users
    assert (joined["users"] == joined["users_engine"]).all()
    # The span lies inside the call the engine timed.
    assert (joined["duration_s"] * 1e6 <= joined["latency_us"]).all()
    assert joined["duration_s"].median() >= 0.020
    counts = json.loads((run_dir / files.COLLECTION).read_text())["components"][SERVICE]
    assert counts["matched"] == requests.height and counts["untagged"] == 0, counts
