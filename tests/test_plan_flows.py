"""Flow plans: a bad one is refused before the run, the error naming the file, the
line and the field; a good one names its steps as the run's tables will."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.feeds import read_feed
from pinchpoint.plan.model import parse_plan

HEAD = """[target]
url = "http://127.0.0.1:8080"

[load]
users = 2
duration = "1s"
"""

GOOD = (
    HEAD
    + """
[[request]]
path = "/healthz"

[[flow]]
name = "shop"

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
capture = [{ name = "token", json = "$.token" }]

[[flow.step]]
path = "/api/orders"
headers = { Authorization = "Bearer ${token}" }
check = { status = [200, 304], json = { "$.ok" = true } }

[[flow]]
name = "other"
[[flow.step]]
path = "/x/${iteration}"
"""
)


def test_a_flow_plan_names_each_step_and_feeds_the_engine(tmp_path: Path) -> None:
    plan = parse_plan(GOOD, "good.toml")
    assert plan.endpoints() == [
        "GET /healthz", "shop/login", "shop/GET /api/orders", "other/GET /x/${iteration}",
    ]  # fmt: skip
    config = engine_config(plan, "r1", tmp_path / "records")
    # The request beside flows becomes a flow of one step: the engine sends flows only.
    assert config["requests"] == []
    assert [f["name"] for f in config["flows"]] == ["GET /healthz", "shop", "other"]
    orders = config["flows"][1]["steps"][1]
    assert orders["checks"] == [("status", "200,304", ""), ("json", "$.ok", "true")]
    assert config["flows"][1]["steps"][0]["captures"] == [("token", "json", "$.token", "first")]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        # A variable used before anything sets it.
        (("${token}", "${tokn}"), "bad.toml:22: flow[0].step[1].headers.Authorization: ${tokn}"),
        # A JSONPath that does not parse.
        (('json = "$.token"', 'json = "$.[token"'), "bad.toml:18: flow[0].step[0].capture[0].json"),
        # A regular expression that does not compile.
        (
            ('json = "$.token"', 'regex = "(unclosed"'),
            "bad.toml:18: flow[0].step[0].capture[0].regex",
        ),
        # Two sources for one capture.
        (
            ('json = "$.token"', 'json = "$.a", header = "b"'),
            "bad.toml:18: flow[0].step[0].capture[0]",
        ),
        # A status that is not one.
        (("[200, 304]", "[200, 999]"), "bad.toml:23: flow[0].step[1].check.status"),
        # A JSONPath key of a check that does not parse.
        (('"$.ok" = true', '"$..[" = true'), "bad.toml:23: flow[0].step[1].check.json.$..["),
        # A step name is free, a flow name is not.
        (('name = "other"', 'name = "no spaces"'), "bad.toml:26: flow[1].name"),
    ],
)
def test_a_bad_flow_names_file_line_and_field(change: tuple[str, str], where: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(GOOD.replace(*change, 1), "bad.toml")
    assert str(e.value).startswith(where), str(e.value)


def test_flows_are_refused_in_open_loop() -> None:
    text = GOOD.replace(
        'users = 2\nduration = "1s"', "[[load.phase]]\nduration = 1\narrival_rate = 5"
    )
    with pytest.raises(PlanError, match=r"flow\[0\]: flows run in closed loop"):
        parse_plan(text, "open.toml")


def test_a_feed_error_names_the_data_file_and_its_line(tmp_path: Path) -> None:
    csv = tmp_path / "accounts.csv"
    csv.write_text("user,password\nuser0,pw-0\nuser1\n")
    text = GOOD.replace('name = "other"', f'name = "other"\nfeed = {{ file = "{csv}" }}')
    plan = parse_plan(text, "fed.toml")  # the header is checked with the plan...
    with pytest.raises(ValueError, match=rf"{csv}:3: 1 values, the header has 2"):
        engine_config(plan, "r1", tmp_path / "records")  # ...every row before the run.
    csv.write_text("user,user_index\nx,1\n")
    with pytest.raises(
        PlanError, match=r"fed.toml:\d+: flow\[1\].feed.file: .*'user_index' is a built-in"
    ):
        parse_plan(text, "fed.toml")
    missing = GOOD.replace('name = "other"', 'name = "other"\nfeed = { file = "/nonexistent.csv" }')
    with pytest.raises(
        PlanError, match=r"flow\[1\].feed.file: /nonexistent.csv: cannot read the feed"
    ):
        parse_plan(missing, "fed.toml")


def test_json_lines_feeds_keep_strings_and_write_other_values_as_json(tmp_path: Path) -> None:
    lines = tmp_path / "rows.jsonl"
    lines.write_text('{"name": "a", "n": 1, "ok": true}\n\n{"name": "b", "n": 2.5, "ok": null}\n')
    data = read_feed(lines)
    assert data.columns == ["name", "n", "ok"]
    assert data.rows == [["a", "1", "true"], ["b", "2.5", "null"]]
    lines.write_text('{"name": "a"}\n{"other": 1}\n')
    with pytest.raises(ValueError, match=rf"{lines}:2: keys \['other'\]"):
        read_feed(lines)
    lines.write_text('{"name": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=rf"{lines}:2: not JSON"):
        read_feed(lines)


def test_comparisons_headers_time_and_picks_reach_the_engine_as_checks(tmp_path: Path) -> None:
    text = GOOD.replace(
        'check = { status = [200, 304], json = { "$.ok" = true } }',
        'check = { json = { "$.ok" = true, "$.price" = { gt = 0, le = "${token}" },'
        ' "$.tags" = { len = 2 }, "$.kind" = { in = ["a", 1, true], ne = "b" } },'
        ' header = { Content-Type = "application/json" }, max_ms = 250 }\non_fail = "stop_user"',
    ).replace('json = "$.token" }', 'json = "$.tokens[*]", pick = "random" }')
    config = engine_config(parse_plan(text, "good.toml"), "r1", tmp_path / "records")
    login, orders = config["flows"][1]["steps"]
    assert login["captures"] == [("token", "json", "$.tokens[*]", "random")]
    assert (login["on_fail"], orders["on_fail"]) == ("restart", "stop_user")
    assert orders["checks"] == [
        ("json", "$.ok", "true"),
        ("json_gt", "$.price", "0.0"),
        ("json_le", "$.price", "${token}"),
        ("json_len", "$.tags", "2"),
        ("json_ne", "$.kind", "b"),
        ("json_in", "$.kind", '["a", "1", "true"]'),
        ("header", "Content-Type", "application/json"),
        ("max_ms", "250.0", ""),
    ]


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (
            ('json = "$.token" }', 'header = "x", pick = "random" }'),
            "bad.toml:18: flow[0].step[0].capture[0].pick: pick = 'random' needs json or regex",
        ),
        (('"$.ok" = true', '"$.ok" = { }'), "bad.toml:23: flow[0].step[1].check.json.$.ok"),
        (('"$.ok" = true', '"$.ok" = { len = -1 }'), "bad.toml:23: flow[0].step[1].check.json"),
        (('"$.ok" = true', '"$.ok" = { gt = "${nope}" }'), "bad.toml:23: flow[0].step[1].check"),
        (("[200, 304]", "[200], max_ms = 0"), "bad.toml:23: flow[0].step[1].check.max_ms"),
        (
            ('path = "/api/orders"', 'path = "/api/orders"\non_fail = "abort"'),
            "bad.toml:22: flow[0].step[1].on_fail",
        ),
    ],
)
def test_a_bad_comparison_pick_or_policy_names_file_line_and_field(
    change: tuple[str, str], where: str
) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(GOOD.replace(*change, 1), "bad.toml")
    assert str(e.value).startswith(where), str(e.value)


def test_flows_beside_a_locustfile_are_refused_not_dropped(tmp_path: Path) -> None:
    from pinchpoint.plan.model import Plan

    locustfile = tmp_path / "shop.py"
    locustfile.write_text("from locust import HttpUser\n\nclass Shop(HttpUser):\n    pass\n")
    with pytest.raises(PlanError) as e:
        Plan.with_locustfile(GOOD, "plan.toml", locustfile)
    assert str(e.value).startswith("plan.toml:11: flow[0]: [[flow]] beside a locustfile"), str(
        e.value
    )
    assert "the flows would never run" in str(e.value)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ("[200, 304]", '"created"'),
            "bad.toml:23: flow[0].step[1].check.status: 'created' is not an HTTP "
            "status: give a code or a list of codes",
        ),
        (
            ("[200, 304]", "[200, 999]"),
            "bad.toml:23: flow[0].step[1].check.status: 999 is not an HTTP status (100-599)",
        ),
        (
            ('json = { "$.ok" = true }', 'matches = "(open"'),
            "bad.toml:23: flow[0].step[1].check.matches: regular expression",
        ),
    ],
)
def test_a_check_mistake_is_one_line_naming_the_key_as_written(
    change: tuple[str, str], said: str
) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(GOOD.replace(*change, 1), "bad.toml")
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(said), message


ARITHMETIC = GOOD.replace(
    'check = { status = [200, 304], json = { "$.ok" = true } }',
    'check = { json = { "$.total" = { COMPARE } } }',
)


def test_numeric_checks_reach_the_engine_as_arithmetic(tmp_path: Path) -> None:
    compare = 'le = "(${token} + 2) * 1.1", equals = "${token}", gt = 0'
    plan = parse_plan(ARITHMETIC.replace("COMPARE", compare), "good.toml")
    checks = engine_config(plan, "r1", tmp_path / "records")["flows"][1]["steps"][1]["checks"]
    assert checks == [
        ("json_gt", "$.total", "0.0"),
        ("json_le", "$.total", "(${token} + 2) * 1.1"),
        ("json_equals", "$.total", "${token}"),
    ]


@pytest.mark.parametrize(
    ("compare", "why"),
    [
        ('le = "${budget} * 1.1"', "le: ${budget} is not set before this step"),
        ('le = "${token} *"', "le: '${token} *': a number or ${variable} is missing after `*`"),
        (
            'ge = "max(${token}, 1)"',
            "ge: 'max(${token}, 1)': \"max\" at character 1 is not a number",
        ),
        ('gt = "(1 + ${iteration}"', "gt: '(1 + ${iteration}': a `(` has no closing `)`"),
        ('le = "cheap"', "le: 'cheap': \"cheap\" at character 1 is not a number"),
        ("equals = true", "equals: true is not a number: this compares numbers"),
        (f'le = "{"1+" * 100}1"', "le: '1+1+1+"),
    ],
)
def test_bad_arithmetic_in_a_check_is_one_error_naming_flow_step_check_and_field(
    compare: str, why: str
) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan(ARITHMETIC.replace("COMPARE", compare), "bad.toml")
    message = str(e.value)
    assert message.startswith(f"bad.toml:23: flow[0].step[1].check.json.$.total.{why}"), message
    assert "\n" not in message


def test_a_check_reading_a_later_capture_or_a_whole_list_is_refused() -> None:
    later = ARITHMETIC.replace("COMPARE", 'le = "${later} * 2"').replace(
        '[[flow]]\nname = "other"',
        '[[flow.step]]\npath = "/l"\ncapture = [{ name = "later", json = "$.x" }]\n\n'
        '[[flow]]\nname = "other"',
    )
    with pytest.raises(PlanError, match=r"\.total\.le: \$\{later\} is not set before this step"):
        parse_plan(later, "bad.toml")
    listed = ARITHMETIC.replace("COMPARE", 'le = "${token}"').replace(
        'json = "$.token" }', 'json = "$.tokens[*]", pick = "all" }'
    )
    with pytest.raises(PlanError, match=r"\.total\.le: \$\{token\} is a list, not a number"):
        parse_plan(listed, "bad.toml")
    fine = listed.replace('le = "${token}"', 'le = "${token[-1]} * 2"')
    assert parse_plan(fine, "good.toml").flow[0].step[1].check is not None
