"""WebSocket steps in plans: messages reach the engine named as the run's tables name
them; a mistake is refused before the run in one line naming the file, the line and
the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan

PLAN = """[target]
url = "http://127.0.0.1:8080"

[load]
users = 2
duration = "1s"

[[flow]]
name = "chat"

[[flow.step]]
name = "room"
ws = "/ws/chat?room=${user_index}"

[[flow.step.message]]
name = "welcome"
capture = [{ name = "n", json = "$.n" }]

[[flow.step.message]]
send = '{"say": "${n}"}'
binary = true
check = { json = { "$.n" = { ge = 1 } }, max_ms = 50 }

[[flow.step.message]]
send = "bye"
receive = false
"""


def test_a_websocket_step_reaches_the_engine_with_its_messages(tmp_path: Path) -> None:
    plan = parse_plan(PLAN, "plan.toml")
    assert plan.endpoints() == ["chat/room", "chat/room/welcome", "chat/room/#2", "chat/room/#3"]
    assert plan.endpoint_kinds() == ["ws_session"] + ["ws_message"] * 3
    (step,) = engine_config(plan, "r1", tmp_path / "records")["flows"][0]["steps"]
    request = step["request"]
    assert request["ws"] and request["path"] == "/ws/chat?room=${user_index}"
    welcome, say, bye = request["messages"]
    assert welcome == {
        "name": "chat/room/welcome",
        "send": None,
        "binary": False,
        "receive": True,
        "captures": [("n", "json", "$.n", "first")],
        "checks": [],
    }
    assert (say["send"], say["binary"], say["checks"][0]) == (
        '{"say": "${n}"}',
        True,
        ("json_ge", "$.n", "1.0"),
    )
    assert (bye["send"], bye["receive"]) == ("bye", False)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('ws = "/ws/chat', 'path = "/x"\nws = "/ws/chat'),
            "bad.toml:13: flow[0].step[0].path: set path or ws, not both",
        ),
        (
            ('ws = "/ws/chat', 'method = "POST"\nws = "/ws/chat'),
            "bad.toml:13: flow[0].step[0].method: a WebSocket upgrade is a GET, not POST",
        ),
        (
            ('ws = "/ws/chat', 'ws = "ws/chat'),
            "bad.toml:13: flow[0].step[0].ws: path 'ws/chat?room=${user_index}' must start with '/'",
        ),
        (
            ('ws = "/ws/chat?room=${user_index}"', 'path = "/x"'),
            'bad.toml:11: flow[0].step[0].message: messages travel on a WebSocket: set ws = "/path", not path',
        ),
        (
            ('send = "bye"\nreceive = false', "receive = false"),
            "bad.toml:25: flow[0].step[0].message[2].receive: a message sends a frame, receives one, or both",
        ),
        (
            ("max_ms = 50", "status = 101"),
            "bad.toml:22: flow[0].step[0].message[1].check.status: a frame has no status",
        ),
        (
            ('json = "$.n"', 'header = "x"'),
            "bad.toml:17: flow[0].step[0].message[0].capture[0]: a frame has no headers or cookies",
        ),
        (
            ('"${n}"', '"${m}"'),
            "bad.toml:20: flow[0].step[0].message[1].send: ${m} is not set before this step",
        ),
        (
            ('url = "http://127.0.0.1:8080"', 'url = "http://127.0.0.1:8080"\nhttp = "2"'),
            "bad.toml:14: flow[0].step[0].ws: a WebSocket upgrade is an HTTP/1.1 request",
        ),
    ],
)
def test_a_websocket_mistake_names_file_line_and_field(change: tuple[str, str], said: str) -> None:
    text = PLAN.replace(*change, 1)
    with pytest.raises(PlanError) as e:
        parse_plan(text, "bad.toml")
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(said), message


OPEN = """[target]
url = "http://127.0.0.1:8080"

[load]
phase = [{ duration = "2s", arrival_rate = 50 }]

[[request]]
ws = "/ws/echo"
message = [{ name = "hi", send = "hi", check = { contains = "hi" } }, { send = "again" }]

[[request]]
path = "/healthz"
"""


def test_a_websocket_request_goes_as_itself_in_open_loop_and_as_a_flow_in_closed_loop(
    tmp_path: Path,
) -> None:
    plan = parse_plan(OPEN, "plan.toml")
    assert plan.endpoints() == ["WS /ws/echo", "WS /ws/echo/hi", "WS /ws/echo/#2", "GET /healthz"]
    # Each record's kind, as the engine counts them apart.
    assert plan.endpoint_kinds() == ["ws_session", "ws_message", "ws_message", "request"]
    config = engine_config(plan, "r1", tmp_path / "records")
    ws, plain = config["requests"]
    assert config["flows"] == []
    assert (ws["ws"], [m["name"] for m in ws["messages"]]) == (
        True,
        ["WS /ws/echo/hi", "WS /ws/echo/#2"],
    )
    assert (plain["ws"], plain["messages"]) == (False, [])
    closed = OPEN.replace(
        'phase = [{ duration = "2s", arrival_rate = 50 }]', 'users = 2\nduration = "1s"'
    )
    config = engine_config(parse_plan(closed, "plan.toml"), "r1", tmp_path / "records")
    assert config["requests"] == []
    assert [f["name"] for f in config["flows"]] == ["WS /ws/echo", "GET /healthz"]
    assert config["flows"][0]["steps"][0]["request"]["messages"] == ws["messages"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('message = [{ name = "hi"', 'path = "/x"\nmessage = [{ name = "hi"'),
            "bad.toml:9: request[0].path: set path or ws, not both",
        ),
        (
            ('ws = "/ws/echo"', 'ws = "/ws/echo"\nbody = "x"'),
            "bad.toml:9: request[0].body: a WebSocket upgrade has no body",
        ),
        (
            ('path = "/healthz"', 'path = "/healthz"\nmessage = [{ send = "x" }]'),
            "bad.toml:13: request[1].message: messages travel on a WebSocket",
        ),
        (
            ('send = "again"', 'send = "${user_index}"'),
            "bad.toml:9: request[0].message[1].send: ${user_index} is not set: an open-loop "
            "arrival has no variables",
        ),
        (
            ('send = "hi",', 'send = "hi", capture = [{ name = "x", json = "$.x" }],'),
            "bad.toml:9: request[0].message[0].capture: an open-loop arrival keeps no variables",
        ),
    ],
)
def test_a_websocket_request_mistake_names_file_line_and_field(
    change: tuple[str, str], said: str
) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(OPEN.replace(*change, 1), "bad.toml")
    assert str(e.value).startswith(said), str(e.value)
