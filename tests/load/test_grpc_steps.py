"""gRPC calls against a real grpcio server (its stubs generated from the .proto in the
test), in closed loop (flow steps) and open loop (requests): unary calls and each
message of a server stream counted and timed against the server's known delay, checks
and captures on the answer's JSON, and the run's tag in every call's metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from grpc_helpers import DELAY_MS, Server, open_plan
from grpc_helpers import shop as start_shop

from pinchpoint import pipeline
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files

# Judges counts and latencies against a server that sleeps: with the timed tests, beside
# the parallel ones at low priority.
pytestmark = pytest.mark.timed


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path, Server]]:
    with start_shop(tmp_path_factory.mktemp("grpc")) as s:
        yield s.port, s.proto, s.server


def _run(text: str, out: Path) -> tuple[pl.DataFrame, dict]:
    outcome = pipeline.execute(parse_plan(text, "plan.toml"), text, out)
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    return requests, run


def _since_send(requests: pl.DataFrame, calls: int) -> list[tuple[int, int]]:
    """(k, µs from its call's send) of each message of the streams: a message's record
    starts where the one before it ended, the first where its call started, so a
    message that came early only after a late one is still k delays after the send. Two
    users' streams sent in the same microsecond both start there: either chain is k
    delays after that send."""
    after: dict[int, list[dict]] = {}
    for r in requests.filter(pl.col("endpoint") == 2).iter_rows(named=True):
        after.setdefault(r["start_us"], []).append(r)
    found = []
    for call in requests.filter(pl.col("endpoint") == calls).iter_rows(named=True):
        at, k = call["start_us"], 0
        while after.get(at):
            message = after[at].pop()
            k, at = k + 1, message["start_us"] + message["latency_us"]
            found.append((k, at - call["start_us"]))
    left = sum(len(v) for v in after.values())
    assert not left, f"{left} messages follow no call"
    return found


CLOSED = """
[target]
url = "http://127.0.0.1:PORT"
http = "2"

[load]
users = 2
duration = "2s"
warmup = "0s"

[[flow]]
name = "shop"

[[flow.step]]
name = "echo"
grpc = "test.Shop/Echo"
proto = "PROTO"
data = { id = "u${user_index}" }
capture = [{ name = "name", json = "$.name" }]
check = { json = { "$.id" = "u${user_index}" } }

[[flow.step]]
name = "count"
grpc = "test.Shop/Count"
proto = "PROTO"
data = { id = "${name}", n = 3 }
check = { json = { "$" = { len = 3 }, "$[2].index" = 3, "$[0].id" = "${name}" } }
"""


def test_closed_loop_calls_and_streamed_messages_are_counted_and_timed(
    shop: tuple[int, Path, Server], tmp_path: Path
) -> None:
    port, proto, server = shop
    text = CLOSED.replace("PORT", str(port)).replace("PROTO", str(proto))
    requests, run = _run(text, tmp_path / "runs")
    assert run["endpoint_names"] == ["shop/echo", "shop/count", "shop/count/message"]
    assert requests["error"].null_count() == requests.height, run.get("error_reasons")
    assert set(requests["status"].to_list()) == {200}
    by = {e: requests.filter(pl.col("endpoint") == e) for e in range(3)}
    echoes, streams, messages = (by[e].height for e in range(3))
    # A walk takes the echo's delay and the stream's three: about 80 ms, 25 walks a user.
    assert 20 <= echoes <= 60, (echoes, streams)
    assert streams in (echoes, echoes - 1, echoes - 2)
    assert messages == 3 * streams
    delay_us = DELAY_MS * 1000
    assert by[0]["latency_us"].min() >= delay_us
    assert by[0]["latency_us"].median() < 4 * delay_us
    # Each message is the server's delay after the one before, however the client's
    # reads bunch them: the k-th comes k delays or more after the send.
    since = _since_send(requests, 1)
    assert len(since) == messages and max(k for k, _ in since) == 3
    assert all(us >= k * delay_us for k, us in since), min(us - k * delay_us for k, us in since)
    assert by[2]["latency_us"].median() < 2 * delay_us
    assert by[1]["latency_us"].min() >= 3 * delay_us
    ids = requests["req_id"]
    assert ids.n_unique() == requests.height
    tags = [t for t in server.tags if f"run={run['run_id']}" in t]
    assert len(tags) == echoes + streams
    assert all("; users=2; req=" in t for t in tags)


OPEN = open_plan(1.5)


def test_open_loop_calls_arrive_at_their_rate_timed_from_their_intended_time(
    shop: tuple[int, Path, Server], tmp_path: Path
) -> None:
    port, proto, _ = shop
    text = OPEN.replace("PORT", str(port)).replace("PROTO", str(proto))
    requests, run = _run(text, tmp_path / "open")
    assert run["endpoint_names"] == [
        "gRPC test.Shop/Echo",
        "gRPC test.Shop/Count",
        "gRPC test.Shop/Count/message",
    ]
    assert requests["error"].null_count() == requests.height, run.get("error_reasons")
    calls = requests.filter(pl.col("endpoint") < 2)
    # 40/s then 80/s for 1.5 s each, shared by the two requests.
    per_step = dict(calls.group_by("step").len().iter_rows())
    assert abs(per_step[0] - 60) <= 3 and abs(per_step[1] - 120) <= 3, per_step
    echoes = requests.filter(pl.col("endpoint") == 0)
    streams = requests.filter(pl.col("endpoint") == 1)
    messages = requests.filter(pl.col("endpoint") == 2)
    assert abs(echoes.height - streams.height) <= 1
    assert messages.height == 2 * streams.height
    delay_us = DELAY_MS * 1000
    assert echoes["service_us"].min() >= delay_us
    assert streams["service_us"].min() >= 2 * delay_us
    since = _since_send(requests, 1)
    assert len(since) == messages.height and max(k for k, _ in since) == 2
    assert all(us >= k * delay_us for k, us in since), min(us - k * delay_us for k, us in since)
    assert (calls["latency_us"] >= calls["service_us"]).all()
    assert requests["req_id"].n_unique() == requests.height
