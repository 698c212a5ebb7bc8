"""Seeded random edits of full plans: each gives a plan whose numbers are all finite and
in range, or a PlanError whose every line names the file; never another exception."""

from __future__ import annotations

import math
import random
import re
import time

import pytest

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import MAX_USERS, Plan, parse_plan
from pinchpoint.plan.toml import MAX_DURATION_S

CLOSED = """\
[target]
url = "http://127.0.0.1:9/"
http = "2"
streams_per_connection = 4

[load]
lower = 1
upper = 3
step = 1
duration = "2s"
think_time = { uniform = ["1ms", "2ms"] }
timeout = "5s"
warmup = 0.5
threads = 1

[[request]]
path = "/a"
method = "POST"
headers = { "X-A" = "b" }
weight = 2
timeout = "1s"

[sampling]
interval = 1

[[component]]
name = "web"
calls = ["app"]
workers = 2
[component.log]
path = "access.log"
format = "nginx"
log_format = '$remote_addr "$request" $status $request_time'

[[component]]
name = "app"
[component.process]
pids = [1]

[[agent]]
name = "a"
url = "http://127.0.0.1:9"
timeout = 3

[sla]
p50_ms = 15
error_rate = 0.01
"""

OPEN = """\
[target]
url = "https://127.0.0.1:9/"
insecure = true

[load]
arrivals = "poisson"
max_in_flight = 10

[[load.phase]]
duration = "2s"
arrival_rate = 5
ramp_to = 10

[[load.phase]]
duration = 2
arrival_count = 10

[[load.phase]]
pause = "1s"

[[request]]
path = "/"
"""

VALUES = [
    "nan", "inf", "-inf", "1e30", "1e-30", "1000000000000", "-1", "0", "1.5", "9" * 40,
    '""', '"\\r\\n"', '"a b"', '"\\u0000"', '"1e30h"', '"nan"', '"-1s"', "[]", "{}", "true",
    "[nan]", "[inf, 1]", '"http://[::1/"', '"http://x:99999"', '"GE T"', '"%("', '"$"',
    "18446744073709551616", "[" * 80 + "]" * 80, '"\\u00e9"',
]  # fmt: skip
_ASSIGNMENT = re.compile(r"^(\s*[A-Za-z0-9_\".-]+\s*=\s*)(.*)$")


def _mutate(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    kind = rng.randrange(4)
    i = rng.randrange(len(lines))
    if kind == 0 and (m := _ASSIGNMENT.match(lines[i])):
        lines[i] = m.group(1) + rng.choice(VALUES)
    elif kind == 1:
        at = rng.randrange(len(lines[i]) + 1)
        lines[i] = lines[i][:at] + rng.choice("[]{}\"'=#\\,.\r\t\x00 é9") + lines[i][at:]
    elif kind == 2:
        del lines[i]
    else:
        lines.insert(i, lines[rng.randrange(len(lines))])
    return "\n".join(lines)


def _check_in_range(plan: Plan) -> None:
    for level in plan.load.levels():
        assert math.isfinite(level.level) and 0 <= level.level <= 1_000_000
        assert math.isfinite(level.duration) and 0 <= level.duration <= MAX_DURATION_S
        assert level.users <= MAX_USERS
    assert math.isfinite(plan.load.timeout) and plan.load.timeout <= MAX_DURATION_S
    assert 1 <= plan.target.port <= 65535
    assert plan.tiers() is not None


@pytest.mark.parametrize("text", [CLOSED, OPEN], ids=["closed", "open"])
def test_random_edits_give_a_plan_in_range_or_a_plan_error(text: str) -> None:
    rng = random.Random(10)
    parse_plan(text, "p.toml")
    outcomes = {"plan": 0, "error": 0}
    deadline = time.monotonic() + 5.0
    for _ in range(600):
        if time.monotonic() > deadline:
            break
        mutated = text
        for _ in range(rng.randrange(1, 4)):
            mutated = _mutate(mutated, rng)
        try:
            plan = parse_plan(mutated, "p.toml")
        except PlanError as e:
            outcomes["error"] += 1
            assert all(line.startswith("p.toml") for line in str(e).splitlines()), str(e)
            assert all(line.isprintable() for line in str(e).splitlines()), str(e)
        else:
            outcomes["plan"] += 1
            _check_in_range(plan)
    assert outcomes["error"] > 100
    assert outcomes["plan"] > 10
