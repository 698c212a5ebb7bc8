"""`[[otlp]]` in a plan: a listen address checked by the schema, and one held by another
socket refused before the run, each naming the line and field."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from pinchpoint.load.preflight import check_otlp_listeners
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan

PLAN = """
[target]
url = "http://127.0.0.1:9"

[load]
users = 1
duration = "1s"

[[request]]
path = "/"

[[otlp]]
listen = "{listen}"
settle = "2s"
"""


def test_an_otlp_table_parses_with_its_settle_time() -> None:
    plan = parse_plan(PLAN.format(listen="127.0.0.1:4318"))
    assert plan.otlp[0].address == ("127.0.0.1", 4318)
    assert plan.otlp[0].settle == 2.0


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("4318", "not host:port"),
        ("127.0.0.1:99999", "not host:port"),
        ("collector:4318", "not an IP"),
    ],
)
def test_a_bad_listen_address_names_its_line(listen: str, says: str) -> None:
    with pytest.raises(PlanError, match=rf"p\.toml:13: otlp\[0\]\.listen: .*{says}"):
        parse_plan(PLAN.format(listen=listen), "p.toml")


def test_an_address_already_held_is_refused_before_the_run(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        text = PLAN.format(listen=f"127.0.0.1:{port}")
        with pytest.raises(PlanError, match=r"p\.toml:13: otlp\[0\]\.listen: cannot listen on"):
            check_otlp_listeners(parse_plan(text), text, "p.toml")


def test_an_otlp_table_takes_a_listen_address_or_a_file_not_both() -> None:
    text = PLAN.format(listen="127.0.0.1:4318").replace('settle = "2s"', 'file = "spans.json"')
    with pytest.raises(PlanError, match=r"otlp\[0\]: .*set listen .* or file"):
        parse_plan(text, "p.toml")
    only_file = PLAN.format(listen="x").replace('listen = "x"', 'file = "spans.json"')
    assert parse_plan(only_file).otlp[0].source == "otlp file spans.json"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        ("fifo", "is a FIFO"),
        ("device", "is a character device"),
        ("folder", "is a folder"),
    ],
)
def test_a_file_source_that_is_not_a_regular_file_is_refused_naming_its_key(
    tmp_path: Path, make: str, says: str
) -> None:
    path = tmp_path / "spans"
    if make == "fifo":
        os.mkfifo(path)
    elif make == "device":
        path = Path("/dev/zero")
    else:
        path.mkdir()
    text = PLAN.format(listen="x").replace('listen = "x"', f'file = "{path}"')
    with pytest.raises(PlanError, match=rf"p\.toml:13: otlp\[0\]\.file: .*{says}, not a regular"):
        parse_plan(text, "p.toml")


def test_a_file_source_not_written_yet_is_accepted(tmp_path: Path) -> None:
    text = PLAN.format(listen="x").replace('listen = "x"', f'file = "{tmp_path / "later.json"}"')
    assert parse_plan(text).otlp[0].file == str(tmp_path / "later.json")
