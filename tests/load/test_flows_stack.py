"""Flows against the demo app's shop journey behind nginx and gunicorn: login and a
token capture, a list and an id capture, a detail, a form post with the session
cookie; checks that catch a wrong answer; captures that find nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.demo.env import WRONG_EVERY_ENV
from pinchpoint.demo.plan import component_lines
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "shop_flow.toml"
STEPS = ["shop/login", "shop/orders", "shop/detail", "shop/note"]


pytestmark = pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing())


def _example_plan(url: str, components: list[dict], load: str) -> str:
    """examples/shop_flow.toml pointed at `url` with the stack's components and `load`."""
    text = EXAMPLE.read_text()
    text = text.replace("http://127.0.0.1:8080", url)
    text = text.replace('"examples/accounts.csv"', json.dumps(str(ROOT / "examples/accounts.csv")))
    text = re.sub(r"\[load\]\n(.*?\n)\n", f"[load]\n{load}\n\n", text, count=1, flags=re.S)
    return text + "\n".join(component_lines(components)) + "\n"


def _run(text: str, runs: Path) -> tuple[Path, dict, pl.DataFrame]:
    outcome = pipeline.execute(parse_plan(text, "shop_flow.toml"), text, runs)
    requests = pl.read_parquet(outcome.run_dir / files.REQUESTS)
    return outcome.run_dir, outcome.verdict, requests


def test_the_shop_journey_is_walked_step_by_step_with_tiers_per_named_request(
    tmp_path: Path,
) -> None:
    load = 'lower = 2\nupper = 6\nstep = 4\nduration = "3s"\nwarmup = "0.5s"\nthink_time = "20ms"'
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        text = _example_plan(stack.url, stack.components(), load)
        run_dir, verdict, requests = _run(text, tmp_path / "runs")
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["endpoint_names"] == STEPS
    # Every step answered as the checks expect: logins 200, notes 201, no error at all.
    assert requests["error"].null_count() == requests.height
    by_step = dict(requests.group_by("endpoint").len().iter_rows())
    assert set(by_step) == {0, 1, 2, 3}
    # Users walk the steps in order: each step is sent about as often as the login.
    assert max(by_step.values()) - min(by_step.values()) <= 2 * 6
    statuses = dict(requests.group_by("endpoint").agg(pl.col("status").max()).iter_rows())
    assert statuses == {0: 200, 1: 200, 2: 200, 3: 201}
    assert set(requests.filter(pl.col("endpoint") == 3)["status"].to_list()) == {201}

    named = {e["endpoint"]: e for e in verdict["endpoints"]}
    assert list(named) == STEPS
    for name in STEPS:
        top = named[name]["steps"][-1]
        assert top["users"] == 6 and top["requests"] > 20 and top["errors"] == 0
        # Each named request has its own time in each tier it went through.
        assert {"nginx", "gunicorn", "app"} <= set(top["tiers"])
        assert top["tiers"]["app"]["count"] >= top["requests"] * 0.9
        assert top["tiers"]["nginx"]["p50_ms"] >= top["tiers"]["app"]["p50_ms"]
    # The login (a password check and two inserts) takes the app longer than the list.
    login_app = named["shop/login"]["steps"][-1]["tiers"]["app"]["p50_ms"]
    assert login_app > 0
    report = (run_dir / files.REPORT).read_text()
    for name in STEPS:
        assert name in report


def test_checks_catch_a_wrong_answer_and_count_it_as_a_check_error(tmp_path: Path) -> None:
    load = 'users = 3\nduration = "3s"\nwarmup = "0s"'
    with DemoStack(tmp_path / "stack", workers=1, app_env={WRONG_EVERY_ENV: "3"}) as stack:
        text = _example_plan(stack.url, [], load)
        run_dir, verdict, requests = _run(text, tmp_path / "runs")
    detail = requests.filter(pl.col("endpoint") == 2)
    wrong = detail.filter(pl.col("error") == "check")
    # One worker answers every third detail with another order's id: a third fail.
    assert detail.height >= 30
    assert abs(wrong.height / detail.height - 1 / 3) < 0.05
    assert set(wrong["status"].to_list()) == {200}
    # Nothing else fails, and a wrong detail ends the walk (on_fail's default, restart):
    # a note follows each right detail only.
    assert requests.filter(pl.col("endpoint") != 2)["error"].null_count() == (
        requests.height - detail.height
    )
    notes = requests.filter(pl.col("endpoint") == 3).height
    assert abs(notes - (detail.height - wrong.height)) <= 3
    run = json.loads((run_dir / files.RUN).read_text())
    reasons = run["error_reasons"]["check"]
    assert any("check json $.id" in r and "expected" in r for r in reasons)
    assert verdict["steps"][0]["errors_by_class"] == {"check": wrong.height} or (
        verdict["steps"][0]["errors_by_class"].get("check", 0) > 0
    )


def test_a_capture_that_finds_nothing_restarts_the_flow(tmp_path: Path) -> None:
    text = f"""
[target]
url = "URL"

[load]
users = 2
duration = "2s"
warmup = "0s"

[[flow]]
name = "broken"
feed = {{ file = {json.dumps(str(ROOT / "examples/accounts.csv"))}, per = "iteration" }}

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
headers = {{ Content-Type = "application/json" }}
body = '{{"user": "${{user}}", "password": "${{password}}"}}'
capture = [{{ name = "missing", json = "$.no_such_key" }}]

[[flow.step]]
name = "never"
path = "/api/orders/${{missing}}"
"""
    with DemoStack(tmp_path / "stack", workers=1) as stack:
        run_dir, _, requests = _run(text.replace("URL", stack.url), tmp_path / "runs")
    assert requests.filter(pl.col("endpoint") == 1).height == 0
    logins = requests.filter(pl.col("endpoint") == 0)
    assert logins.height > 20
    assert set(logins["error"].to_list()) == {"capture"}
    assert set(logins["status"].to_list()) == {200}
    run = json.loads((run_dir / files.RUN).read_text())
    assert run["error_reasons"]["capture"][0].endswith(
        "capture json $.no_such_key: selects nothing (status 200)"
    )


KINDS_PLAN = """
[target]
url = "URL"

[load]
users = 4
duration = "3s"
warmup = "0s"

[[flow]]
name = "kinds"
weight = 2
feed = { file = "ACCOUNTS", per = "user" }

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
headers = { Content-Type = "application/json" }
body = '{"user": "${user}", "password": "${password}"}'
capture = [
  { name = "token", json = "$.token" },
  { name = "sess", cookie = "session" },
  { name = "ctype", header = "content-type" },
]
# A row per user, in order: user N logs in as userN.
check = { status = 200, json = { "$.user" = "user${user_index}" } }

[[flow.step]]
name = "orders"
path = "/api/orders"
headers = { Authorization = "Bearer ${token}" }
capture = [{ name = "order", regex = '"id":\\s*(\\d+)' }]

[[flow.step]]
name = "detail"
path = "/api/orders/${order}"
headers = { Authorization = "Bearer ${token}" }
check = { json = { "$.id" = "${order}" }, matches = '"qty":\\s*\\d+' }

[[flow.step]]
name = "note"
method = "POST"
path = "/api/orders/${order}/notes"
headers = { Cookie = "session=${sess}", Content-Type = "application/x-www-form-urlencoded" }
body = "note=${iteration}"
check = { status = 201, contains = "noted ${order}" }

[[flow.step]]
name = "item"
method = "POST"
path = "/api/items"
headers = { Content-Type = "${ctype}" }
body = '{"name": "n${iteration}", "price": 1}'
check = { status = 201, json = { "$.name" = "n${iteration}", "$.price" = 1 } }

[[flow]]
name = "picked"
feed = { file = "PICKED", per = "iteration", order = "random" }

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
body = "user=${name}&password=${secret}"
headers = { Content-Type = "application/x-www-form-urlencoded" }
check = { status = 200, json = { "$.user" = "${name}" } }

[[flow]]
name = "stale"

[[flow.step]]
name = "note"
method = "POST"
path = "/api/orders/1/notes"
headers = { Cookie = "session=0000", Content-Type = "application/x-www-form-urlencoded" }
body = "note=x"
check = { status = 201 }
"""


def test_each_kind_of_capture_feed_and_check_with_real_responses(tmp_path: Path) -> None:
    picked = tmp_path / "picked.jsonl"
    picked.write_text(
        "\n".join(json.dumps({"name": f"user{n}", "secret": f"pw-{n}"}) for n in range(5, 10))
    )
    text = KINDS_PLAN.replace("ACCOUNTS", str(ROOT / "examples/accounts.csv"))
    text = text.replace("PICKED", str(picked))
    with DemoStack(tmp_path / "stack", workers=2) as stack:
        run_dir, _, requests = _run(text.replace("URL", stack.url), tmp_path / "runs")
    run = json.loads((run_dir / files.RUN).read_text())
    names = run["endpoint_names"]
    assert names == [
        "kinds/login", "kinds/orders", "kinds/detail", "kinds/note", "kinds/item",
        "picked/login", "stale/note",
    ]  # fmt: skip
    counts = dict(requests.group_by("endpoint").len().iter_rows())
    assert all(counts.get(i, 0) > 5 for i in range(len(names))), counts
    errors = requests.filter(pl.col("error").is_not_null())
    # Only the stale cookie fails: the server says 401 and the status check catches it.
    assert set(errors["endpoint"].to_list()) == {6}
    assert set(errors["error"].to_list()) == {"check"}
    assert set(errors["status"].to_list()) == {401}
    assert errors.height == counts[6]
    assert any("401 is not one of [201]" in r for r in run["error_reasons"]["check"])
