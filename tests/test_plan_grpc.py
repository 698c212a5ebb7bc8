"""gRPC calls in plans: a step or request reaches the engine as a POST to its method with
its message as JSON, named as the run's tables name it (a stream's messages after it);
a mistake is refused before the run in one line naming the file, the line and the
field, the engine's compiled .proto saying what the call cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan

PROTO = """syntax = "proto3";
package shop;
message ItemRequest { string id = 1; int32 count = 2; repeated string tags = 3; }
message Item { string id = 1; string name = 2; }
service Catalog {
  rpc GetItem(ItemRequest) returns (Item);
  rpc Watch(ItemRequest) returns (stream Item);
  rpc Upload(stream ItemRequest) returns (Item);
}
"""

PLAN = """[target]
url = "http://127.0.0.1:50051"
http = "2"

[load]
users = 2
duration = "1s"

[[flow]]
name = "shop"

[[flow.step]]
name = "item"
grpc = "shop.Catalog/GetItem"
proto = "PROTO"
data = { id = "${user_index}", count = 2 }
capture = [{ name = "name", json = "$.name" }]
check = { json = { "$.id" = "${user_index}" }, max_ms = 50 }

[[flow.step]]
name = "watch"
grpc = "shop.Catalog/Watch"
proto = "PROTO"
data = '{"id": "${name}", "tags": ["a"]}'
headers = { authorization = "Bearer x" }
"""


@pytest.fixture
def plan_text(tmp_path: Path) -> str:
    proto = tmp_path / "shop.proto"
    proto.write_text(PROTO)
    return PLAN.replace("PROTO", str(proto))


def test_a_grpc_step_reaches_the_engine_as_a_post_to_its_method(
    plan_text: str, tmp_path: Path
) -> None:
    plan = parse_plan(plan_text, "plan.toml")
    assert plan.endpoints() == ["shop/item", "shop/watch", "shop/watch/message"]
    assert plan.endpoint_kinds() == ["grpc_call", "grpc_call", "grpc_message"]
    item, watch = engine_config(plan, "r1", tmp_path / "records")["flows"][0]["steps"]
    request = item["request"]
    assert (request["method"], request["path"]) == ("POST", "/shop.Catalog/GetItem")
    assert request["body"] == b'{"id": "${user_index}", "count": 2}'
    assert request["grpc"] == {
        "method": "shop.Catalog/GetItem",
        "proto": str(tmp_path / "shop.proto"),
        "import_paths": [],
    }
    assert item["checks"][0] == ("json", "$.id", "${user_index}")
    assert watch["request"]["headers"] == [("authorization", "Bearer x")]
    assert watch["request"]["body"] == b'{"id": "${name}", "tags": ["a"]}'


def test_an_open_loop_call_is_a_request_and_a_closed_loop_one_a_flow_of_one_step(
    tmp_path: Path,
) -> None:
    proto = tmp_path / "shop.proto"
    proto.write_text(PROTO)
    head = '[target]\nurl = "http://127.0.0.1:50051/base"\nhttp = "2"\n\n'
    call = f'\n[[request]]\ngrpc = "shop.Catalog/Watch"\nproto = "{proto}"\ndata = {{ id = "a" }}\n'
    open_plan = parse_plan(
        head + '[load]\nphase = [{ duration = "1s", arrival_rate = 5 }]\n' + call
    )
    assert open_plan.endpoints() == [
        "gRPC shop.Catalog/Watch",
        "gRPC shop.Catalog/Watch/message",
    ]
    config = engine_config(open_plan, "r1", tmp_path / "records")
    ((request),) = config["requests"]
    assert request["path"] == "/shop.Catalog/Watch"
    closed = parse_plan(head + '[load]\nusers = 1\nduration = "1s"\n' + call)
    config = engine_config(closed, "r1", tmp_path / "records")
    assert config["requests"] == []
    assert config["flows"][0]["steps"][0]["name"] == "gRPC shop.Catalog/Watch"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('grpc = "shop.Catalog/GetItem"', 'grpc = "shop.Catalog/Gone"'),
            "bad.toml:14: flow[0].step[0].grpc: service shop.Catalog has no method Gone "
            "(it has: GetItem, Watch, Upload)",
        ),
        (
            ('grpc = "shop.Catalog/GetItem"', 'grpc = "shop.Shelf/GetItem"'),
            "bad.toml:14: flow[0].step[0].grpc: ",
        ),
        (
            ('grpc = "shop.Catalog/GetItem"', 'grpc = "shop.Catalog/Upload"'),
            "bad.toml:14: flow[0].step[0].grpc: shop.Catalog/Upload streams its requests",
        ),
        (
            ("count = 2", "colour = 2"),
            "bad.toml:16: flow[0].step[0].data: colour: shop.ItemRequest has no field colour "
            "(it has: id, count, tags)",
        ),
        (
            ("count = 2", 'count = "many"'),
            "bad.toml:16: flow[0].step[0].data: not a shop.ItemRequest",
        ),
        (
            ('"tags": ["a"]', '"tags": ['),
            "bad.toml:24: flow[0].step[1].data: the request message is not JSON",
        ),
        (
            ('name = "item"\n', 'name = "item"\nws = "/ws"\n'),
            "bad.toml:14: flow[0].step[0].ws: a request is a WebSocket or a gRPC call, not both",
        ),
        (
            ('name = "item"\n', 'name = "item"\nmethod = "GET"\n'),
            "bad.toml:14: flow[0].step[0].method: a gRPC call is a POST, not GET",
        ),
        (
            ("max_ms = 50", "status = 200"),
            "bad.toml:18: flow[0].step[0].check.status: a gRPC call's status is its grpc-status",
        ),
        (
            ('"${name}"', '"${nobody}"'),
            "bad.toml:24: flow[0].step[1].data: ${nobody} is not set before this step",
        ),
        (
            ('http = "2"', 'http = "1.1"'),
            'bad.toml:14: flow[0].step[0].grpc: gRPC runs over HTTP/2: [target] http = "2"',
        ),
    ],
)
def test_a_grpc_mistake_names_file_line_and_field(
    plan_text: str, change: tuple[str, str], said: str
) -> None:
    text = plan_text.replace(*change, 1)
    with pytest.raises(PlanError) as e:
        parse_plan(text, "bad.toml")
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(said), message


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            'data = { id = "1", colour = 2, size = 3 }',
            "bad.toml:16: flow[0].step[0].data: colour: shop.ItemRequest has no field colour "
            "(it has: id, count, tags); size: shop.ItemRequest has no field size (it has: id, "
            "count, tags)",
        ),
        (
            'data = { colour = 2, count = "many" }',
            "bad.toml:16: flow[0].step[0].data: colour: shop.ItemRequest has no field colour "
            "(it has: id, count, tags); not a shop.ItemRequest: ",
        ),
    ],
)
def test_every_mistake_of_a_data_block_is_said(plan_text: str, data: str, said: str) -> None:
    text = plan_text.replace('data = { id = "${user_index}", count = 2 }', data, 1)
    with pytest.raises(PlanError) as e:
        parse_plan(text, "bad.toml")
    assert str(e.value).startswith(said), str(e.value)


def test_a_missing_proto_or_a_call_field_without_grpc_is_named(
    plan_text: str, tmp_path: Path
) -> None:
    gone = plan_text.replace(str(tmp_path / "shop.proto"), str(tmp_path / "none.proto"), 1)
    with pytest.raises(
        PlanError, match=r"^bad.toml:15: flow\[0\].step\[0\].proto: .*none.proto: no such file"
    ):
        parse_plan(gone, "bad.toml")
    stray = plan_text.replace('grpc = "shop.Catalog/GetItem"', 'path = "/x"', 1)
    with pytest.raises(
        PlanError, match=r"^bad.toml:15: flow\[0\].step\[0\].proto: proto applies to a gRPC call"
    ):
        parse_plan(stray, "bad.toml")
    broken = tmp_path / "broken.proto"
    broken.write_text("syntax = 'proto3';\nmessage {\n")
    with pytest.raises(PlanError, match=r"^bad.toml:15: flow\[0\].step\[0\].proto: .*broken.proto"):
        parse_plan(plan_text.replace(str(tmp_path / "shop.proto"), str(broken), 1), "bad.toml")


def test_an_open_loop_call_sends_its_data_as_written(tmp_path: Path) -> None:
    proto = tmp_path / "shop.proto"
    proto.write_text(PROTO)
    text = (
        '[target]\nurl = "http://127.0.0.1:50051"\nhttp = "2"\n\n'
        '[load]\nphase = [{ duration = "1s", arrival_rate = 5 }]\n\n'
        f'[[request]]\ngrpc = "shop.Catalog/GetItem"\nproto = "{proto}"\n'
        'data = { id = "${user_index}" }\n'
    )
    with pytest.raises(
        PlanError, match=r"^bad.toml:11: request\[0\].data: \$\{user_index\} is not set"
    ):
        parse_plan(text, "bad.toml")
