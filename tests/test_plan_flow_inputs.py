"""Hostile input in a flow plan is refused before the run, naming the file, line and
key: a `${` without its `}`, a feed above the row limit, a feed value that cannot go in
the header it is used in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.feeds import MAX_ROWS, read_feed
from pinchpoint.plan.model import parse_plan

PLAN = """[target]
url = "http://127.0.0.1:8080"

[load]
users = 2
duration = "1s"

[[request]]
path = "/healthz"

[[flow]]
name = "shop"
FEED
[[flow.step]]
path = "/api/orders"
headers = { Authorization = "Bearer ${user_index}" }
body = "n=${iteration}"
check = { contains = "ok ${user_index}" }
"""


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (
            ("${user_index}", "${user_index"),
            "bad.toml:16: flow[0].step[0].headers.Authorization: `${` at",
        ),
        (("n=${iteration}", "n=${iteration"), "bad.toml:17: flow[0].step[0].body: `${` at"),
        (('"ok ${user_index}"', '"ok ${"'), "bad.toml:18: flow[0].step[0].check.contains: `${`"),
        # Beside flows, a request is sent as a flow of one step: its `${` are templates.
        (('"/healthz"', '"/h/${x"'), "bad.toml:9: request[0].path: `${` at character 4"),
        (('"/healthz"', '"/h/${x}"'), "bad.toml:9: request[0].path: ${x} is not a built-in"),
    ],
)
def test_an_unterminated_template_is_refused_with_file_line_and_key(
    change: tuple[str, str], where: str
) -> None:
    text = PLAN.replace("FEED", "")
    parse_plan(text, "good.toml")
    with pytest.raises(PlanError) as e:
        parse_plan(text.replace(*change, 1), "bad.toml")
    assert str(e.value).startswith(where), str(e.value)
    assert "has no closing `}`" in str(e.value) or "built-in" in str(e.value)


def test_a_literal_dollar_brace_is_not_a_template() -> None:
    text = PLAN.replace("FEED", "").replace("${user_index}", "$${token", 1)
    parse_plan(text.replace("n=${iteration}", "n=$${x and ${iteration}"), "ok.toml")


def test_a_feed_above_the_row_limit_is_refused_naming_the_file(tmp_path: Path) -> None:
    feed = tmp_path / "tokens.csv"
    feed.write_text("token\n" + "t\n" * MAX_ROWS)
    assert len(read_feed(feed).rows) == MAX_ROWS == 1_000_000
    with feed.open("a") as f:
        f.write("one-more\n")
    text = PLAN.replace("FEED", f'feed = {{ file = "{feed}" }}')
    plan = parse_plan(text, "fed.toml")
    with pytest.raises(PlanError) as e:
        engine_config(plan, "r1", tmp_path / "records")  # the rows are read before the run
    assert str(e.value) == (
        f"flow[0].feed.file: {feed}:1000002: more than 1,000,000 rows, the most a feed holds"
    )
    jsonl = tmp_path / "tokens.jsonl"
    jsonl.write_text('{"token": "t"}\n' * (MAX_ROWS + 1))
    with pytest.raises(ValueError, match=rf"{jsonl}:1000001: more than 1,000,000 rows"):
        read_feed(jsonl)


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b"])
def test_a_feed_value_that_cannot_go_in_its_header_is_refused_before_the_run(
    tmp_path: Path, value: str
) -> None:
    feed = tmp_path / "tokens.jsonl"
    feed.write_text(json.dumps({"token": "fine"}) + "\n" + json.dumps({"token": value}) + "\n")
    text = PLAN.replace("FEED", f'feed = {{ file = "{feed}" }}')
    plan = parse_plan(text.replace("Bearer ${user_index}", "Bearer ${token}"), "fed.toml")
    with pytest.raises(PlanError) as e:
        engine_config(plan, "r1", tmp_path / "records")
    message = str(e.value)
    assert message.startswith(f"flow[0].feed.file: {feed}: row 2, column 'token': the value holds")
    assert "${token} is used in header Authorization of step[0]" in message
    assert "a" + value[1] not in message and "Injected" not in message  # never quoted
    # The same value in a body is sent as it is.
    body_only = parse_plan(text.replace("n=${iteration}", "${token}"), "fed.toml")
    config = engine_config(body_only, "r1", tmp_path / "records")
    assert config["flows"][1]["feed"]["rows"] == [["fine"], [value]]


PLAIN = '[target]\nurl = "http://127.0.0.1:9/"\n[load]\nLOAD\n[[request]]\npath = "/"\nFIELD\n'
CLOSED_LOAD = 'users = 1\nduration = "1s"'
OPEN_LOAD = '[[load.phase]]\nduration = "1s"\narrival_rate = 5'
FLOW = '[[flow]]\nname = "f"\n[[flow.step]]\nFIELD\n'


@pytest.mark.parametrize("load", [CLOSED_LOAD, OPEN_LOAD])
@pytest.mark.parametrize(
    ("field", "key"),
    [
        ('path = "/${iteration"', "path"),
        ('path = "/"\nbody = "n=${iteration"', "body"),
        ('path = "/"\nheaders = { X-N = "${user_index" }', "headers.X-N"),
    ],
)
def test_an_unterminated_template_is_refused_in_a_request_as_in_a_flow_step(
    load: str, field: str, key: str
) -> None:
    # Alone, a request is sent as written: "/${iteration" went out as that text.
    plain = PLAIN.replace("LOAD", load).replace('path = "/"\nFIELD', field)
    with pytest.raises(PlanError) as refused:
        parse_plan(plain, "plain.toml")
    said = str(refused.value)
    line = next(n for n, t in enumerate(plain.splitlines(), 1) if t.startswith(key[:4]))
    assert said.startswith(f"plain.toml:{line}: request[0].{key}: ")
    flow = PLAIN.replace("LOAD", CLOSED_LOAD).replace("FIELD", FLOW.replace("FIELD", field))
    with pytest.raises(PlanError) as in_flow:
        parse_plan(flow, "flow.toml")
    why = str(in_flow.value).split(f"flow[0].step[0].{key}: ", 1)[1]
    assert said.split(f"request[0].{key}: ", 1)[1] == why
    assert why.endswith("has no closing `}`")


def test_a_request_alone_keeps_a_closed_template_and_a_literal_as_written() -> None:
    text = PLAIN.replace("LOAD", CLOSED_LOAD).replace('path = "/"\nFIELD', 'path = "/${x}/$${y"')
    assert parse_plan(text, "ok.toml").request[0].path == "/${x}/$${y"
