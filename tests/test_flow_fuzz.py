"""Property-based fuzzing of flows (Hypothesis): templates, captures, checks, JSONPaths
and feeds in plans. A plan is refused with a PlanError, or the engine compiles its flows
as a run would (the plan's check and the engine's agree), never another exception. The
engine's own fuzzing of templates, captures and JSONPath on bodies is in
crates/pinchpoint-engine/tests/fuzz_flows.rs; bench/fuzz_flows.py runs both longer."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pinchpoint import _engine
from pinchpoint.load.engine_config import engine_config
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.feeds import read_feed
from pinchpoint.plan.model import parse_plan
from pinchpoint.plan.templates import scan

# Examples per property: the short budget times FLOW_FUZZ_SCALE (bench/fuzz_flows.py).
SCALE = int(os.environ.get("FLOW_FUZZ_SCALE", "1"))
# The short budget of each property, in the order of this module.
SHORT = (800, 1000, 2500, 500)

_DIR = Path(tempfile.mkdtemp(prefix="pinchpoint-flow-fuzz-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
FEED = _DIR / "accounts.csv"
FEED.write_text("user,password\nu1,p1\nu2,p2\n")

NAMES = ["user", "password", "token", "user_index", "iteration", "nope", " user ", ""]

# What templates are made of: their syntax, names known and unknown, and hostile text.
template = st.lists(
    st.sampled_from(["${", "$${", "}", "$", "{", "\\", '"', "'", "\r\n", "\n", "\x00", "/", " "])
    | st.sampled_from(NAMES)
    | st.text(max_size=3),
    max_size=10,
).map("".join)

jsonpath = st.lists(
    st.sampled_from(["$", ".a", "..*", "..", "[", "]", "*", "?", "@", "'", '"', "(", ")", ","])
    | st.sampled_from([":", "0", "-1", "==", "&&", "length(", "match(", "$.x", " ", "\\"])
    | st.text(max_size=2),
    max_size=12,
).map("".join)


def _toml(text: str) -> str:
    return json.dumps(text)  # a TOML basic string: JSON's escapes are TOML's


def _plan(path: str, header: str, body: str, contains: str, capture: str, feed: bool) -> str:
    feed_line = f"feed = {{ file = {_toml(str(FEED))} }}\n" if feed else ""
    return f"""[target]
url = "http://127.0.0.1:9"

[load]
users = 1
duration = "1s"

[[request]]
path = {_toml("/r" + path)}

[[flow]]
name = "f"
{feed_line}
[[flow.step]]
path = "/login"
capture = [{{ name = "token", json = {_toml(capture)} }}]

[[flow.step]]
path = {_toml("/x" + path)}
headers = {{ X-A = {_toml(header)} }}
body = {_toml(body)}
check = {{ contains = {_toml(contains)} }}
"""


def _accepted_by_the_engine(text: str) -> None:
    try:
        plan = parse_plan(text, "fuzz.toml")
    except PlanError as e:
        assert str(e).startswith("fuzz.toml"), str(e)
        return
    config = engine_config(plan, "fuzz", _DIR / "records")
    assert _engine.flows_error(config["flows"]) is None


@settings(max_examples=800 * SCALE)
@given(template, template, template, template, st.booleans())
def test_a_flow_plan_is_refused_or_compiled_by_the_engine(
    path: str, header: str, body: str, contains: str, feed: bool
) -> None:
    _accepted_by_the_engine(_plan(path, header, body, contains, "$.token", feed))


@settings(max_examples=1000 * SCALE)
@given(jsonpath)
def test_a_capture_jsonpath_is_refused_or_compiled_by_the_engine(path: str) -> None:
    _accepted_by_the_engine(_plan("", "a", "", "", path, False))
    error = _engine.expression_error("json", path)
    assert error is None or error.startswith("JSONPath")


@settings(max_examples=2500 * SCALE)
@given(template)
def test_the_template_scan_agrees_with_the_engine(text: str) -> None:
    found = scan(text)
    flows = [
        {
            "name": "f",
            "weight": 1,
            "feed": {"columns": ["user"], "rows": [["u"]], "per_user": False, "random": False},
            "steps": [
                {
                    "name": "f/GET /",
                    "request": {
                        "method": "POST",
                        "path": "/",
                        "headers": [],
                        "body": text.encode(),
                        "weight": 1,
                        "timeout_s": None,
                    },
                    "think": None,
                    "captures": [],
                    "checks": [],
                    "hook": False,
                    "on_fail": "restart",
                }
            ],
        }
    ]
    error = _engine.flows_error(flows)
    known = {"user", "user_index", "iteration"}
    # The engine stops at the first fault: a name it does not know, or a `${` unclosed.
    if any(n not in known for n in found.names):
        assert error is not None and "unknown variable" in error
    elif found.error is not None:
        assert error is not None and "without its" in error
    else:
        assert error is None, error


feed_line = st.lists(
    st.sampled_from([",", '"', "\r\n", "\n", "a", "user", "{", "}", ":", "1", "\x00", " "])
    | st.text(max_size=3),
    max_size=12,
).map("".join)


@settings(max_examples=500 * SCALE)
@given(st.lists(feed_line, min_size=0, max_size=5), st.booleans())
def test_a_feed_file_gives_rows_or_an_error_naming_it(lines: list[str], jsonl: bool) -> None:
    path = _DIR / ("feed.jsonl" if jsonl else "feed.csv")
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    try:
        data = read_feed(path)
    except ValueError as e:
        assert str(e).startswith(str(path)), str(e)
        return
    assert data.rows and all(len(r) == len(data.columns) for r in data.rows)
