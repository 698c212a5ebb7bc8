"""A flow's Python hook against the real shop journey: it computes what the plan cannot
say (a login body, a signature header), and a hook that raises fails only the requests
it was asked to change."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pinchpoint import pipeline
from pinchpoint.demo import DemoStack
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import parse_plan
from pinchpoint.rundir import files
from pinchpoint_lab.needs import nginx_missing

pytestmark = pytest.mark.skipif(bool(nginx_missing()), reason=nginx_missing())

HOOKS = """
import hashlib
import json


def login_body(request, vars):
    n = int(vars["user_index"]) % 200
    request["body"] = json.dumps({"user": f"user{n}", "password": f"pw-{n}"})
    request["headers"].append(("Content-Type", "application/json"))
    request["headers"].append(("X-Signature", hashlib.sha256(request["body"].encode()).hexdigest()))


def broken(request, vars):
    if request["step"] == 1:
        raise ValueError("no key for " + request["path"])
    return login_body(request, vars)
"""

PLAN = """
[target]
url = "URL"

[load]
users = 3
duration = "2s"
warmup = "0s"
hook = "HOOKS:FUNCTION"

[[flow]]
name = "signed"

[[flow.step]]
name = "login"
method = "POST"
path = "/api/login"
hook = true
capture = [{ name = "token", json = "$.token" }]
check = { json = { "$.user" = "user${user_index}" } }

[[flow.step]]
name = "orders"
path = "/api/orders"
headers = { Authorization = "Bearer ${token}" }
hook = true
check = { status = 200 }
"""


def _run(tmp_path: Path, function: str) -> tuple[dict, pl.DataFrame]:
    hooks = tmp_path / "hooks.py"
    hooks.write_text(HOOKS)
    with DemoStack(tmp_path / "stack", workers=1) as stack:
        text = PLAN.replace("URL", stack.url).replace("HOOKS", str(hooks))
        text = text.replace("FUNCTION", function)
        outcome = pipeline.execute(parse_plan(text, "hooked.toml"), text, tmp_path / "runs")
    run = json.loads((outcome.run_dir / files.RUN).read_text())
    return run, pl.read_parquet(outcome.run_dir / files.REQUESTS)


def test_a_hook_computes_the_login_body_the_plan_cannot_say(tmp_path: Path) -> None:
    _, requests = _run(tmp_path, "login_body")
    logins = requests.filter(pl.col("endpoint") == 0)
    # Without the hook the login has no body: the app answers 400 and the capture fails.
    assert logins.height > 20
    assert logins["error"].null_count() == logins.height
    assert set(logins["status"].to_list()) == {200}
    orders = requests.filter(pl.col("endpoint") == 1)
    assert orders.height >= logins.height - 3 and orders["error"].null_count() == orders.height


def test_a_hook_that_raises_fails_its_requests_with_the_reason(tmp_path: Path) -> None:
    run, requests = _run(tmp_path, "broken")
    orders = requests.filter(pl.col("endpoint") == 1)
    assert orders.height > 10
    assert set(orders["error"].to_list()) == {"capture"}
    assert set(orders["status"].to_list()) == {0}  # never sent
    logins = requests.filter(pl.col("endpoint") == 0)
    assert logins["error"].null_count() == logins.height
    assert any(
        "hook: ValueError: no key for /api/orders" in r for r in run["error_reasons"]["capture"]
    )


def test_a_hook_that_cannot_be_loaded_is_a_plan_error(tmp_path: Path) -> None:
    from pinchpoint.load.engine_config import engine_config

    text = PLAN.replace("URL", "http://127.0.0.1:9").replace("HOOKS:FUNCTION", "nofile.py:sign")
    with pytest.raises(PlanError, match=r"load.hook: hook 'nofile.py:sign': no file nofile.py"):
        engine_config(parse_plan(text, "h.toml"), "r", tmp_path / "rec")
    (tmp_path / "h.py").write_text("x = 1\n")
    text = PLAN.replace("URL", "http://127.0.0.1:9").replace(
        "HOOKS:FUNCTION", f"{tmp_path}/h.py:sign"
    )
    with pytest.raises(PlanError, match=r"has no function sign"):
        engine_config(parse_plan(text, "h.toml"), "r", tmp_path / "rec")
