"""List variables in plans: a capture with `pick = "all"`, its values read by index or
by a step with `foreach`; a value read where no list or no foreach gives it is refused
before the run, naming the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.plan.templates import element

PLAN = """[target]
url = "http://127.0.0.1:8080"

[load]
users = 2
duration = "1s"

[[flow]]
name = "shop"

[[flow.step]]
name = "list"
path = "/api/items"
capture = [{ name = "ids", json = "$.items[*].id", pick = "all" }]

[[flow.step]]
name = "ends"
path = "/api/items/${ids[0]}?last=${ids[-1]}"
body = '{"all": ${ids}}'

[[flow.step]]
name = "each"
path = "/api/items/${ids[i]}"
foreach = "ids"
"""


def test_a_list_and_its_foreach_reach_the_engine(tmp_path: Path) -> None:
    config = engine_config(parse_plan(PLAN, "plan.toml"), "r1", tmp_path / "records")
    listing, ends, each = config["flows"][0]["steps"]
    assert listing["captures"] == [("ids", "json", "$.items[*].id", "all")]
    assert [s["foreach"] for s in (listing, ends, each)] == [None, None, "ids"]
    assert each["request"]["path"] == "/api/items/${ids[i]}"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            ('pick = "all"', 'pick = "first"'),
            "bad.toml:18: flow[0].step[1].path: ${ids[0]} reads a list, but ids is not "
            'captured with pick = "all" before this step',
        ),
        (
            ('foreach = "ids"', ""),
            "bad.toml:23: flow[0].step[2].path: ${ids[i]} is read outside a step with "
            'foreach = "ids"',
        ),
        (
            ('foreach = "ids"', 'foreach = "token"'),
            'bad.toml:24: flow[0].step[2].foreach: "token" is not a list an earlier step '
            'captures with pick = "all"',
        ),
        (
            ('name = "ids", json = "$.items[*].id", pick = "all"', 'name = "ids", header = "x"'),
            "bad.toml:14: flow[0].step[0].capture[0].pick",
        ),
    ],
)
def test_a_list_read_where_nothing_gives_it_names_file_line_and_field(
    change: tuple[str, str], said: str
) -> None:
    text = PLAN.replace(*change, 1)
    if "header" in change[1]:
        text = text.replace('header = "x"', 'header = "x", pick = "all"')
    with pytest.raises(PlanError) as e:
        parse_plan(text, "bad.toml")
    message = str(e.value)
    assert "\n" not in message, message
    assert message.startswith(said), message


@pytest.mark.parametrize(
    ("name", "read"),
    [
        ("ids[0]", ("ids", "0")),
        ("ids[-12]", ("ids", "-12")),
        ("ids[i]", ("ids", "i")),
        ("ids", None),
        ("ids[]", None),
        ("ids[j]", None),
        ("ids[1]]", None),
        ("ids[--1]", None),
        ("ids[1]\n", None),
        ("ids[99999999999999999999]", None),
    ],
)
def test_a_list_value_is_named_as_the_engine_reads_it(
    name: str, read: tuple[str, str] | None
) -> None:
    assert element(name) == read
