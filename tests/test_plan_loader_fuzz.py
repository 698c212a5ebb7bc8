"""Property-based fuzzing of the plan loader (`load_plan`: read_plan_text, then parse_plan),
as `pinchpoint run` and `load` read a plan. Documents come from a strategy of plausible
plans: the real tables and keys with values of random types (numbers huge, NaN, infinite
or negative, strings with control characters, dates, arrays, inline tables, deep nesting),
random extra keys and tables, keys dropped; and from arbitrary text and bytes. The loader
gives a plan whose every number is finite and in range, or raises PlanError; never another
exception. Each line of a PlanError is one error, printable, starting with the file (and
its line); an error about a field names it.

The budget is Hypothesis's profile (tests/conftest.py): a few dozen examples a test in
`make test`; thousands with

    HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/test_plan_loader_fuzz.py
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import os
import re
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from pydantic import BaseModel

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.model import (
    MAX_PLAN_BYTES,
    MAX_RATE,
    MAX_USERS,
    Agent,
    Component,
    Load,
    Log,
    Phase,
    Plan,
    Process,
    Request,
    Sampling,
    Stage,
    Target,
    ThinkTime,
    load_plan,
    parse_plan,
)
from pinchpoint.plan.prometheus import Prometheus, Series
from pinchpoint.plan.sla import Sla
from pinchpoint.plan.toml import MAX_DURATION_S

SOURCE = "fuzz.toml"

# Valid plans the documents start from: each table and key of a plan appears in one.
CLOSED = """\
[target]
url = "http://127.0.0.1:9/"
http = "2"
streams_per_connection = 4
secret_headers = ["X-Key"]

[load]
lower = 1
upper = 3
step = 1
duration = "2s"
think_time = { uniform = ["1ms", "2ms"] }
timeout = "5s"
warmup = 0.5
threads = 1
find_knee = true

[[request]]
path = "/a"
method = "POST"
headers = { "X-A" = "b" }
body = '{"a": 1}'
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
role = "service"
[component.process]
pids = [1]

[[component]]
name = "db"
host = "a"

[[agent]]
name = "a"
url = "http://127.0.0.1:9"
token_env = "PP_FUZZ_TOKEN"
timeout = 3

[[prometheus]]
url = "http://127.0.0.1:9090"
step = "1s"
[prometheus.series.host]
preset = "node_exporter"
selector = 'instance="db1:9100"'
[prometheus.series.db]
columns = { cpu_cores = "rate(x[$window])" }

[sla]
p50_ms = 15
"p99.9_ms" = 80
error_rate = 0.01
slow_ms = 100
slow_share = 0.05
"""

OPEN = """\
[target]
url = "https://127.0.0.1:9/"
insecure = true
tag = false

[load]
arrivals = "poisson"
seed = 7
max_in_flight = 10

[[load.phase]]
name = "warm"
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

STAGES = """\
[target]
url = "http://[::1]:8080/base"

[load]
loop = "closed"
think_time = "10ms"

[[load.stage]]
users = 2
ramp = "1s"

[[load.stage]]
users = 4
hold = "1m"

[[request]]
path = "/x?y=1"

[[component]]
name = "g"
[component.log]
path = "/var/log/g.log"
format = "gunicorn"
[component.process]
pid_file = "g.pid"
"""

BASES = [tomllib.loads(text) for text in (CLOSED, OPEN, STAGES)]

# The keys of each table, found by its path (array indices left out).
MODELS: dict[tuple[str, ...], type[BaseModel]] = {
    (): Plan,
    ("target",): Target,
    ("load",): Load,
    ("load", "stage"): Stage,
    ("load", "phase"): Phase,
    ("load", "think_time"): ThinkTime,
    ("request",): Request,
    ("component",): Component,
    ("component", "log"): Log,
    ("component", "process"): Process,
    ("agent",): Agent,
    ("sampling",): Sampling,
    ("prometheus",): Prometheus,
    ("prometheus", "series", "*"): Series,
    ("sla",): Sla,
}
ALL_KEYS = sorted({name for model in MODELS.values() for name in model.model_fields})
ALL_KEYS += ["token", "username", "password", "p99_ms", "p0_ms", "p100_ms", "p99", "steps"]

# Strings a plan's values are made of, besides random text.
PLAUSIBLE_STRINGS = [
    "6s", "500ms", "2m", "1h", "1e30h", "nan", "inf", "-1s", "0", "1.5", " 6 s ", "30d",
    "http://127.0.0.1:9/", "https://h:443", "http://[::1/", "http://x:99999", "http://x:0",
    "ftp://x", "http://", "http://h/\r\n", "/", "/a b", "/\x00", "a", "GET", "GE T", "POST",
    "nginx", "gunicorn", "probe", "jsonlines", "haproxy", "uwsgi", "apache", "envoy",
    "postgresql", "$status$request_time", "%(", "$", "%{", "{", "(?P<x", "\\", "closed",
    "open", "uniform", "poisson", "1.1", "2", "node_exporter", "cadvisor", "merge",
    "replace", 'instance="a"', "host", "host@a", "web", "app", "db", "a", "..", "g.pid",
    "/dev/null", "/etc/hostname", "/nonexistent/ca.pem", "/etc", "/proc/self/status", "", " ", "é", "\u2028", "\ufeff",
    "PP_FUZZ_TOKEN", "PATH", "X-Key", "Authorization", "bad header", "p99.9_ms",
]  # fmt: skip
PLAUSIBLE_NUMBERS = [
    0, 1, -1, 2, 0.5, 1e-9, 1e30, 10**12, 2**63, 2**64, -(2**63), 99999, 65536, 100_000,
    100_001, 1_000_000, 1024, 1025, 10_001, 4_194_305, 0.1, 0.09, 3600.0, 2592001.0,
    math.nan, math.inf, -math.inf, 1e308, 5e-324,
]  # fmt: skip

_KEY_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_KEYS = st.one_of(st.sampled_from(ALL_KEYS), _KEY_TEXT)
_STRINGS = st.one_of(st.sampled_from(PLAUSIBLE_STRINGS), st.text(max_size=30))
_NUMBERS = st.one_of(
    st.sampled_from(PLAUSIBLE_NUMBERS),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
_SCALARS = st.one_of(
    _STRINGS,
    _NUMBERS,
    st.booleans(),
    st.datetimes(),
    st.datetimes(timezones=st.just(datetime.UTC)),
    st.dates(),
    st.times(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=10,
)


def deep(depth: int, kind: str) -> Any:
    """A value nested `depth` deep: arrays, or tables."""
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "array" else {"a": value}
    return value


class Raw(str):
    """A value written into the TOML text as it is."""


_HOSTILE = st.one_of(
    st.builds(deep, st.integers(1, 200), st.sampled_from(["array", "table"])),
    st.sampled_from(
        [
            Raw("9" * 5000),  # more digits than int() reads
            Raw("1e400"),  # infinite as a float
            Raw("-1e400"),
            Raw("1" + "0" * 400 + ".0"),
            Raw("0x7fffffffffffffffffff"),
            Raw("0o777"),
            Raw("0b1"),
            Raw("1_000"),
            Raw("-0.0"),
            Raw("1979-05-27 07:32:00Z"),
        ]
    ),
    st.text(min_size=1, max_size=5).map(lambda t: t * 3000),
)
# A value of any type for a key: plausible, random, or hostile.
ANY_VALUE = st.one_of(_SCALARS, _VALUES, _HOSTILE)

# -- edits of a plan's data ----------------------------------------------------------------


def containers(data: Any, path: tuple = ()) -> list[tuple]:
    """The paths of every table and array in `data` (array indices included)."""
    found = [path] if isinstance(data, dict | list) else []
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, value in items:
        if isinstance(value, dict | list):
            found += containers(value, (*path, key))
    return found


def model_keys(path: tuple) -> list[str]:
    """The real keys of the table at `path`, when it is one of the plan's."""
    names = tuple(p for p in path if isinstance(p, str))
    if len(names) == 3 and names[:2] == ("prometheus", "series"):
        names = ("prometheus", "series", "*")
    model = MODELS.get(names)
    return list(model.model_fields) if model else []


def at(data: Any, path: tuple) -> Any:
    for part in path:
        data = data[part]
    return data


@st.composite
def edits(draw: st.DrawFn, data: dict) -> tuple[str, tuple]:
    """One edit of `data` in place: a key of some table set to a value of any type (a real
    key, most often, or an extra one) or deleted, or an item of an array set or added.
    Returns what was done and the path of the key or item."""
    path = draw(st.sampled_from(containers(data)))
    table = at(data, path)
    if isinstance(table, list):
        if not table or draw(st.booleans()):
            table.append(draw(ANY_VALUE))
            return "append", path
        index = draw(st.integers(0, len(table) - 1))
        table[index] = draw(ANY_VALUE)
        return "set", (*path, index)
    real = model_keys(path) + list(table)
    kind = draw(st.sampled_from(["set", "set", "set", "extra", "delete"]))
    if kind == "delete" and table:
        key = draw(st.sampled_from(sorted(table)))
        del table[key]
        return "delete", (*path, key)
    key = draw(_KEYS) if kind == "extra" or not real else draw(st.sampled_from(sorted(real)))
    table[key] = draw(ANY_VALUE)
    return "set", (*path, key)


@st.composite
def plan_data(draw: st.DrawFn) -> tuple[dict, list[tuple[str, tuple]]]:
    """A plan's data: one of the valid plans with a few edits, and the edits."""
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    done = [draw(edits(data)) for _ in range(draw(st.integers(0, 4)))]
    return data, done


# -- data as TOML --------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_key(key: object) -> str:
    key = str(key)
    return key if _BARE_KEY.fullmatch(key) else toml_string(key)


def toml_string(text: str) -> str:
    """A TOML basic string: backslash, quote and control characters escaped."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def toml_value(value: Any, style: int) -> str:
    """A value written inline; `style` picks among the ways TOML has to write one."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if style % 3 else (f"+{value}" if value >= 0 else str(value))
    if isinstance(value, float):
        if math.isnan(value):
            return "nan" if style % 2 else "-nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        if style % 4 == 1 and "'" not in value and not any(ord(c) < 0x20 for c in value):
            return f"'{value}'"  # a literal string
        if style % 4 == 2:
            return '"""' + toml_string(value)[1:-1] + '"""'  # multi-line, escaped
        return toml_string(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v, style) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{toml_key(k)} = {toml_value(v, style)}" for k, v in value.items())
        return "{" + ", ".join(pairs) + "}"
    raise TypeError(type(value))


def toml_text(data: dict, style: int, header: tuple[str, ...] = ()) -> str:
    """`data` as a TOML document: tables and arrays of tables under their own headers, as
    plans are written, the rest inline."""
    inline, nested = [], []
    for key, value in data.items():
        is_table = isinstance(value, dict) and value and len(header) < 8
        is_array = isinstance(value, list) and value and all(isinstance(v, dict) for v in value)
        if (is_table or is_array) and style % 5:
            nested.append((key, value))
        else:
            inline.append(f"{toml_key(key)} = {toml_value(value, style)}\n")
    out = "".join(inline)
    for key, value in nested:
        name = (*header, toml_key(key))
        if isinstance(value, dict):
            out += f"\n[{'.'.join(name)}]\n" + toml_text(value, style, name)
        else:
            for item in value:
                out += f"\n[[{'.'.join(name)}]]\n" + toml_text(item, style, name)
    return out


# -- the checks ----------------------------------------------------------------------------

_ERROR_LINE = re.compile(rf"{re.escape(SOURCE)}(?::(\d+))?: (.+)")
# Tables a plan must have: an error may name one the document lacks.
REQUIRED = ("target", "load", "request")


def check_plan(plan: Plan) -> None:
    """Every number of the plan is finite, its load levels in range."""
    for number in numbers(plan.model_dump()):
        assert math.isfinite(number), plan
    for level in plan.load.levels():
        assert 0 <= level.level <= max(MAX_RATE, MAX_USERS)
        assert 0 <= level.duration <= MAX_DURATION_S
        assert level.users <= MAX_USERS
    assert 1 <= plan.target.port <= 65535
    assert plan.tiers() is not None


def numbers(value: Any) -> list[float]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers(v)]
    if isinstance(value, list | tuple):
        return [n for v in value for n in numbers(v)]
    return []


def check_error(error: PlanError, text: str) -> list[str]:
    """Each line of the error is one printable error naming the file, and its line when it
    names one; returns each line's text after the file and line."""
    message = str(error)
    assert message
    rests = []
    for line in message.split("\n"):
        assert line.isprintable(), line
        found = _ERROR_LINE.fullmatch(line)
        assert found, line
        if found.group(1) is not None:
            assert 1 <= int(found.group(1)) <= text.count("\n") + 1, line
        rests.append(found.group(2))
    return rests


def escaped(name: str) -> str:
    """A name as a plan error writes it: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def named_tables(rest: str, names: list[str]) -> list[str]:
    """Which of `names` (top-level tables or keys) an error line names as its field, or
    ["plan"] for an error of the plan as a whole."""
    if rest.startswith("plan: "):
        return ["plan"]
    return [
        name
        for name in names
        if rest.startswith(escaped(name)) and rest[len(escaped(name)) :][:1] in (".", "[", ":")
    ]


def load(text: str) -> Plan | None:
    """The plan of `text`, checked, or None after a checked PlanError."""
    try:
        plan = parse_plan(text, SOURCE)
    except PlanError as e:
        check_error(e, text)
        return None
    check_plan(plan)
    return plan


# -- the tests -----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PP_FUZZ_TOKEN", "fuzz-token-0123456789")


def test_the_plans_the_documents_start_from_load() -> None:
    for data in BASES:
        for style in range(20):
            assert load(toml_text(data, style)) is not None, style


@given(plan_data(), st.integers(0, 59))
def test_edited_plans_give_a_plan_in_range_or_a_plan_error(
    drawn: tuple[dict, list[tuple[str, tuple]]], style: int
) -> None:
    data, _ = drawn
    event("plan" if load(toml_text(data, style)) else "plan error")


@given(st.sampled_from(BASES), st.data())
def test_one_bad_value_is_named_by_the_error(base: dict, draw: st.DataObject) -> None:
    """One key of a valid plan set to a value of any type, or deleted: a plan, or an error
    each of whose lines names a table of the plan as its field (or the plan as a whole),
    one of them the edited key's table. A component renamed may leave a Prometheus series
    naming none: that error names the series."""
    data = copy.deepcopy(base)
    kind, path = draw.draw(edits(data))
    text = toml_text(data, draw.draw(st.integers(0, 59)))
    try:
        tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        event("not TOML")
        load(text)
        return  # refused as TOML, before any field is looked at
    try:
        plan = parse_plan(text, SOURCE)
    except PlanError as e:
        if "nested" in str(e):
            return  # refused for its nesting, before any field is looked at
        names = sorted({*map(str, data), *REQUIRED}, key=len, reverse=True)
        tables = [named_tables(rest, names) for rest in check_error(e, text)]
        assert all(tables), (str(e), kind, path)
        named = {name for found in tables for name in found}
        top = str(path[0])
        also = {"prometheus"} if top == "component" else set()
        assert named & {top, "plan", *also}, (str(e), kind, path)
        event("plan error")
    else:
        check_plan(plan)
        event("plan")


_TOML_CHARS = st.sampled_from([*"[]{}=\"'#.,\\\n\r\t -+_:0123456789eE", "inf", "nan"])


@given(
    st.one_of(
        st.text(),
        st.text(st.characters(codec="utf-8")),
        st.lists(st.one_of(_TOML_CHARS, st.sampled_from(ALL_KEYS)), max_size=60).map("".join),
    )
)
def test_arbitrary_text_gives_a_plan_error(text: str) -> None:
    load(text)


@given(st.sampled_from([CLOSED, OPEN, STAGES]), st.data())
def test_valid_plans_cut_or_spliced_give_a_plan_or_a_plan_error(
    text: str, draw: st.DataObject
) -> None:
    at_ = draw.draw(st.integers(0, len(text)))
    cut = draw.draw(st.integers(0, 40))
    inserted = draw.draw(st.text(max_size=20))
    load(text[:at_] + inserted + text[at_ + cut :])


@given(
    st.one_of(
        st.binary(max_size=400),
        st.sampled_from([CLOSED, OPEN, STAGES]).flatmap(
            lambda text: st.tuples(
                st.just(text.encode()), st.binary(min_size=1, max_size=8)
            ).flatmap(
                lambda pair: st.integers(0, len(pair[0])).map(
                    lambda i: pair[0][:i] + pair[1] + pair[0][i:]
                )
            )
        ),
        st.just(b"#" * (MAX_PLAN_BYTES + 1)),
        st.just("\ufeff[target]\n".encode()),
        st.just(CLOSED.encode("utf-16")),
    )
)
def test_arbitrary_bytes_in_a_file_give_a_plan_or_a_plan_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / SOURCE
        path.write_bytes(data)
        try:
            plan = load_plan(path)
        except PlanError as e:
            message = str(e)
            assert message.startswith(str(path)), message
            assert all(line.isprintable() for line in message.split("\n")), message
            assert all(line.startswith(str(path)) for line in message.split("\n")), message
        else:
            check_plan(plan)


def test_a_plan_loads_from_its_file(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text(CLOSED)
    assert load_plan(path).target.url == "http://127.0.0.1:9/"
    assert json.dumps(load_plan(path).model_dump(mode="json"))


def test_a_line_is_counted_at_line_feeds_only() -> None:
    """Found by the fuzzing: U+0085, U+2028 and other line breaks of Unicode in a string
    counted as lines, so an error below pointed past the end of the plan."""
    text = (
        '[target]\nurl = "http://127.0.0.1:9/"\n[load]\nusers = 1\nduration = "2s"\n'
        '[[request]]\npath = "/"\nheaders = { "X-A" = "a\x85b\u2028c\u2029d" }\n'
        "[sampling]\ninterval = 99\n"
    )
    with pytest.raises(PlanError) as caught:
        parse_plan(text, SOURCE)
    assert str(caught.value).startswith(f"{SOURCE}:10: sampling.interval: ")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_a_ca_file_that_is_not_a_file_is_a_plan_error(tmp_path: Path, kind: str) -> None:
    """Found by the fuzzing: ca_file = "/dev/zero" read until memory ran out, and a FIFO
    hung the loader; either is now refused as not a regular file, unread."""
    path = {"fifo": tmp_path / "ca.pem", "device": Path("/dev/null"), "folder": tmp_path}[kind]
    what = {"fifo": "a FIFO", "device": "a character device", "folder": "a folder"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    text = (
        f'[target]\nurl = "https://127.0.0.1:9/"\nca_file = "{path}"\n'
        '[load]\nusers = 1\nduration = "2s"\n[[request]]\npath = "/"\n'
    )
    errors: list[str] = []

    def parse() -> None:
        with pytest.raises(PlanError) as caught:
            parse_plan(text, SOURCE)
        errors.append(str(caught.value))

    thread = threading.Thread(target=parse, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive() and kind == "fifo":
        with open(path, "wb"):  # lets the reader go
            pass
    assert not thread.is_alive()
    assert errors == [
        f"{SOURCE}:3: target.ca_file: {path}: {what}, not a regular file: "
        "not read as the PEM file of certificates"
    ]


@pytest.mark.parametrize(("count", "duration"), [(2_000_001, '"2s"'), (2_000, '"1ms"'), (10**9, 1)])
def test_arrivals_faster_than_the_highest_rate_are_a_plan_error(count: int, duration: str) -> None:
    """Found by the fuzzing: arrival_count over a short phase made a rate above MAX_RATE
    (10^9 arrivals in 1 ms, 10^12 per second)."""
    text = OPEN.replace(
        "duration = 2\narrival_count = 10", f"duration = {duration}\narrival_count = {count}"
    )
    text = text.replace("max_in_flight = 10", "max_in_flight = 10\nwarmup = 0")
    with pytest.raises(PlanError) as caught:
        parse_plan(text, SOURCE)
    line = text.split("\n").index(f"arrival_count = {count}") + 1
    assert str(caught.value).startswith(f"{SOURCE}:{line}: load.phase[1].arrival_count: ")
    assert "more than 1e+06 requests per second" in str(caught.value)
    ok = OPEN.replace("arrival_count = 10", "arrival_count = 2000000")
    assert parse_plan(ok, SOURCE).load.levels()[1].level == MAX_RATE


@pytest.mark.parametrize(
    "line",
    [
        "[a" + " " * 40_000 + "x",
        "[" + " " * 20_000 + "a" + " " * 20_000 + "?",
        "[[" + " " * 40_000,
    ],
    ids=["spaces after a name", "spaces around a name", "spaces after brackets"],
)
def test_an_error_is_placed_in_time_linear_in_the_plan(line: str) -> None:
    """Finding an error's line read each line with a pattern that took time quadratic in a
    line's spaces: such a line in a multi-line string cost seconds (minutes at 1 MB)."""
    text = OPEN.replace('path = "/"', f'path = "/"\nbody = """\n{line}\n"""\nweight = -1')
    # CPU time of this thread, which parses: a pause of the machine is no time spent here.
    started = time.thread_time()
    with pytest.raises(PlanError) as caught:
        parse_plan(text, SOURCE)
    assert time.thread_time() - started < 1.0
    line_number = text.split("\n").index("weight = -1") + 1
    assert str(caught.value).startswith(f"{SOURCE}:{line_number}: request[0].weight: ")
