"""A discovery as an agent sends it: read back whole, and an answer that is not one refused
with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinchpoint.discover.tier import Address, Tier
from pinchpoint.discover.walk import Discovery
from pinchpoint.discover.wire import WireError, from_json, to_json


def test_a_discovery_reads_back_as_it_was_sent() -> None:
    found = Discovery("http://10.0.0.5:8080/x")
    tier = Tier("nginx", "proxy", 41, pid_file=Path("/run/nginx.pid"),
                log_path=Path("/var/log/nginx/access.log"), log_format="nginx",
                next_hops=[Address("10.0.0.6", 8000), Address(unix=Path("/run/app.sock"))],
                notes=["pid /run/nginx.pid from nginx.conf:3"], warnings=["no upstream time"])  # fmt: skip
    found.tiers, found.calls = [tier], {"nginx": []}
    found.leaves = [("nginx", Address("10.0.0.6", 8000))]
    back = from_json(to_json(found), found.url)
    assert back.tiers == [tier]
    assert back.leaves == found.leaves and back.calls == found.calls


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ([], "not an object"),
        ({"tiers": [{"name": "x", "role": "proxy", "pid": -1}]}, "positive integer"),
        ({"tiers": [{"name": "x", "role": "proxy", "pid": 3, "slots": True}]}, "slots"),
        ({"tiers": [{"name": "", "role": "proxy", "pid": 3}]}, "string of 1 to"),
        ({"leaves": [{"from": None, "address": {"host": "h", "port": 70000}}]}, "port"),
        ({"problems": ["x"] * 1000}, "at most 64"),
    ],
)
def test_an_answer_that_is_not_a_discovery_is_refused(answer: object, reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        from_json(answer, "http://h:1/")
