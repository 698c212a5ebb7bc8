"""The plan's `[[flow]]`: user journeys. A flow is a sequence of steps (requests) a
user walks through in order; a step may take values from its response into variables
(`[[flow.step.capture]]`), used as `${name}` in the paths, headers and bodies of the
steps after it, and check what its response says (`[flow.step.check]`). A flow's
`[flow.feed]` gives test data from a CSV or JSON-lines file, a row per user or per walk.

    [[flow]]
    name = "shop"
    feed = { file = "accounts.csv", per = "user" }

    [[flow.step]]
    name = "login"
    method = "POST"
    path = "/api/login"
    body = '{"user": "${user_name}", "password": "${password}"}'
    headers = { Content-Type = "application/json" }
    capture = [{ name = "token", json = "$.token" }]
    check = { status = [200] }
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, PrivateAttr, model_validator

from pinchpoint.plan.feeds import FeedData, read_columns, read_feed
from pinchpoint.plan.http import Request
from pinchpoint.plan.load_models import Think
from pinchpoint.plan.templates import BUILTIN_VARS, element, is_name, scan
from pinchpoint.plan.toml import Duration, FieldError, Strict

MAX_STEPS = 1000


def variables_in(text: str) -> list[str]:
    """The names `${name}` in a template (`$${` is a literal `${`), up to a `${` without
    its `}` if there is one."""
    return scan(text).names


_UNSET = (
    "is not set before this step: not a feed column, "
    "a built-in (user_index, iteration) or an earlier step's capture"
)


def template_fault(
    templates: list[tuple[tuple, str]],
    usable: set[str],
    unset: str = _UNSET,
    lists: frozenset[str] = frozenset(),
    turn: str | None = None,
) -> tuple[tuple, str] | None:
    """The first template that cannot be read or uses a name not `usable`: (where, why),
    `unset` saying why such a name is not. A list's value (`${name[0]}`) is usable when
    the list is one of `lists`; its turn (`${name[i]}`) only in a step whose foreach is
    `turn`."""
    for loc, text in templates:
        found = scan(text)
        if found.error is not None:
            return loc, found.error
        for name in found.names:
            of_list = element(name)
            why = (
                _element_fault(of_list, lists, turn)
                if of_list is not None
                else (None if name in usable else unset)
            )
            if why is not None:
                return loc, f"${{{name}}} {why}"
    return None


def _element_fault(of_list: tuple[str, str], lists: frozenset[str], turn: str | None) -> str | None:
    base, index = of_list
    if base not in lists:
        return f'reads a list, but {base} is not captured with pick = "all" before this step'
    if index == "i" and turn != base:
        return f'is read outside a step with foreach = "{base}"'
    return None


def request_templates(path: str, headers: dict[str, str], body: str) -> list[tuple[tuple, str]]:
    return [(("path",), path), (("body",), body)] + [
        (("headers", k), v) for k, v in headers.items()
    ]


class Capture(Strict):
    """Takes a value from a step's response into the variable `name`: the first node a
    JSONPath selects in the body, a regular expression's first group (or whole match),
    a response header, or a cookie the user holds after the response. With
    `pick = "random"`, one of the nodes (or matches) at random, drawn from the user's
    stream of the plan's seed. With `pick = "all"`, every one in order: a list variable,
    read as `${name[0]}`, `${name[-1]}`, `${name[i]}` in a step with `foreach = "name"`,
    or `${name}` (a JSON array of the values)."""

    name: str
    json_: str | None = Field(default=None, alias="json")
    regex: str | None = None
    header: str | None = None
    cookie: str | None = None
    pick: Literal["first", "random", "all"] = "first"

    @model_validator(mode="after")
    def _one_source(self) -> Capture:
        if not is_name(self.name):
            raise FieldError("name", f"{self.name!r} is not a variable name (letters, digits, _)")
        if self.name in BUILTIN_VARS:
            raise FieldError("name", f"{self.name!r} is a built-in variable")
        given = [(k, v) for k, v in self._sources() if v is not None]
        if len(given) != 1:
            raise ValueError("set one of json, regex, header or cookie")
        kind, text = given[0]
        if kind in ("json", "regex"):
            _compiles(kind, text)
        elif self.pick != "first":
            raise FieldError("pick", f"pick = {self.pick!r} needs json or regex, not {kind}")
        return self

    def _sources(self) -> list[tuple[str, str | None]]:
        return [
            ("json", self.json_),
            ("regex", self.regex),
            ("header", self.header),
            ("cookie", self.cookie),
        ]

    def source(self) -> tuple[str, str]:
        """(kind, text) of the one source set."""
        return next((k, v) for k, v in self._sources() if v is not None)


def _compiles(kind: str, text: str, field: str | None = None) -> None:
    """FieldError on `field` (default: `kind`) when the engine cannot compile `text`."""
    from pinchpoint import _engine

    error = _engine.expression_error(kind, text)
    if error is not None:
        raise FieldError(field or kind, error.replace("\n", " "))


Scalar = str | int | float | bool
COMPARISONS = ("gt", "lt", "ge", "le", "ne", "in", "len")


class Compare(Strict):
    """Comparisons of a JSON node: numbers (`gt`, `lt`, `ge`, `le`), its text (`ne`, `in`
    a list of values) or its length (`len`, of an array, object or string)."""

    gt: float | str | None = None
    lt: float | str | None = None
    ge: float | str | None = None
    le: float | str | None = None
    ne: Scalar | None = None
    in_: list[Scalar] | None = Field(default=None, alias="in")
    len_: int | None = Field(default=None, alias="len", ge=0)

    def given(self) -> list[tuple[str, str]]:
        """(comparison, expected text) of each one set."""
        out = []
        for name in COMPARISONS:
            value = getattr(self, name + "_" if name in ("in", "len") else name)
            if value is None:
                continue
            if name == "in":
                out.append((name, json.dumps([_text(v) for v in value])))
            else:
                out.append((name, _text(value)))
        return out

    @model_validator(mode="after")
    def _some(self) -> Compare:
        if not self.given():
            raise ValueError(f"set one of {', '.join(COMPARISONS)}")
        return self


def _text(value: Scalar | float) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _status_codes(value: object) -> list[int] | None:
    """A status or a list of them, as a list; one message for any mistake."""
    if value is None:
        return None
    codes: list[int] = []
    for code in value if isinstance(value, list) else [value]:
        if isinstance(code, bool) or not isinstance(code, int):
            raise ValueError(f"{code!r} is not an HTTP status: give a code or a list of codes")
        if not 100 <= code <= 599:
            raise ValueError(f"{code} is not an HTTP status (100-599)")
        codes.append(code)
    return codes


class Check(Strict):
    """What a step's response must say; a response that does not is an error of class
    `check`. `json` maps JSONPaths to the value their first node must equal (a string
    node as it is, another as JSON; a template) or to comparisons (`{ gt = 0 }`);
    `header` maps header names to their value; `max_ms` bounds the response time."""

    status: Annotated[list[int] | None, BeforeValidator(_status_codes)] = None
    contains: str | None = None
    matches: str | None = None
    json_: dict[str, Scalar | Compare] = Field(default_factory=dict, alias="json")
    header: dict[str, str] = Field(default_factory=dict)
    max_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _compile(self) -> Check:
        if self.matches is not None:
            _compiles("regex", self.matches, "matches")
        for path in self.json_:
            try:
                _compiles("json", path)
            except FieldError as e:
                raise FieldError(("json", path), str(e)) from None
        return self

    def engine_checks(self) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        if self.status is not None:
            out.append(("status", ",".join(str(c) for c in self.status), ""))
        if self.contains is not None:
            out.append(("contains", self.contains, ""))
        if self.matches is not None:
            out.append(("matches", self.matches, ""))
        for path, value in self.json_.items():
            if isinstance(value, Compare):
                out += [(f"json_{name}", path, expected) for name, expected in value.given()]
            else:
                out.append(("json", path, _text(value)))
        out += [("header", name, value) for name, value in self.header.items()]
        if self.max_ms is not None:
            out.append(("max_ms", repr(self.max_ms), ""))
        return out

    def templates(self) -> list[tuple[tuple, str]]:
        found: list[tuple[tuple, str]] = []
        if self.contains is not None:
            found.append((("contains",), self.contains))
        for p, v in self.json_.items():
            if isinstance(v, Compare):
                found += [(("json", p, name), text) for name, text in v.given() if name != "in"]
            else:
                found.append((("json", p), str(v)))
        found += [(("header", name), value) for name, value in self.header.items()]
        return found


class Feed(Strict):
    """Test data: a CSV file with a header row, or JSON lines (`.jsonl`), each row's
    columns becoming variables; a row per user (`per = "user"`) or per walk through the
    flow (`per = "iteration"`), in order or at random."""

    file: str
    per: Literal["user", "iteration"] = "iteration"
    order: Literal["sequential", "random"] = "sequential"
    # Columns used in header values, with where (set by the flow): a value of theirs
    # holding CR, LF or NUL could not be sent, and the feed is refused.
    _in_headers: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _readable(self) -> Feed:
        try:
            read_columns(Path(self.file))
        except ValueError as e:
            raise FieldError("file", str(e)) from None
        return self

    def columns(self) -> list[str]:
        return read_columns(Path(self.file))

    def read(self) -> FeedData:
        """Every row; ValueError names the file and line, or the row and column of a
        value that cannot go in the header it is used in (the value is not quoted: it
        may be a secret)."""
        data = read_feed(Path(self.file))
        for i, column in enumerate(data.columns):
            where = self._in_headers.get(column)
            if where is None:
                continue
            for number, row in enumerate(data.rows, start=1):
                bad = next((c for c in "\r\n\0" if c in row[i]), None)
                if bad is not None:
                    raise ValueError(
                        f"{self.file}: row {number}, column {column!r}: the value holds "
                        f"{_CONTROL[bad]}, and ${{{column}}} is used in {where}, "
                        "where it cannot be sent"
                    )
        return data


_CONTROL = {"\r": "a CR", "\n": "an LF", "\0": "a NUL"}


class FlowStep(Strict):
    name: str | None = None
    path: str
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""
    timeout: Duration | None = None
    # The pause after this step instead of [load] think_time.
    think_time: Think | None = None
    capture: list[Capture] = Field(default_factory=list)
    check: Check | None = None
    # Call the run's hook (`[load] hook`) with this step's request before it is sent.
    hook: bool = False
    # When a check or capture of this step fails (or it got no response to read).
    on_fail: Literal["continue", "restart", "stop_user"] = "restart"
    # A list an earlier step captured with pick = "all": the step is sent once per value,
    # in order, `${name[i]}` the value of the turn.
    foreach: str | None = None

    @model_validator(mode="after")
    def _request(self) -> FlowStep:
        Request.model_validate(
            {"path": self.path, "method": self.method, "headers": self.headers, "body": self.body}
        )
        return self

    def label(self) -> str:
        return self.name or f"{self.method} {self.path}"

    def templates(self) -> list[tuple[tuple, str]]:
        found = request_templates(self.path, self.headers, self.body)
        if self.check is not None:
            found += [(("check", *loc), t) for loc, t in self.check.templates()]
        return found


class Flow(Strict):
    name: str
    weight: int = Field(default=1, ge=0, le=10_000)
    feed: Feed | None = None
    step: list[FlowStep] = Field(min_length=1, max_length=MAX_STEPS)

    @model_validator(mode="after")
    def _variables_known(self) -> Flow:
        """A variable is used only once something sets it: a feed column, a built-in,
        or a capture of an earlier step (or of the same step, in its checks); a list's
        values only once a capture with pick = "all" sets it, its turn only in its
        foreach."""
        if not is_name(self.name.replace("-", "_")):
            raise FieldError("name", f"{self.name!r}: a flow name is letters, digits, - and _")
        known = set(BUILTIN_VARS) | set(self.feed.columns() if self.feed else [])
        lists: frozenset[str] = frozenset()
        for i, step in enumerate(self.step):
            if step.foreach is not None and step.foreach not in lists:
                raise FieldError(
                    ("step", i, "foreach"),
                    f'"{step.foreach}" is not a list an earlier step captures with pick = "all"',
                )
            captured = {c.name for c in step.capture}
            listed = lists | {c.name for c in step.capture if c.pick == "all"}
            checks = [(loc, t) for loc, t in step.templates() if loc[0] == "check"]
            requests = [(loc, t) for loc, t in step.templates() if loc[0] != "check"]
            for templates, usable, readable in (
                (requests, known, lists),
                (checks, known | captured, listed),
            ):
                fault = template_fault(templates, usable, lists=readable, turn=step.foreach)
                if fault is not None:
                    raise FieldError(("step", i, *fault[0]), fault[1])
            known |= captured
            lists = listed
        if self.feed is not None:
            self.feed._in_headers = self._header_uses()
        return self

    def _header_uses(self) -> dict[str, str]:
        """Each variable used in a header value: the first step and header it is in."""
        uses: dict[str, str] = {}
        for i, step in enumerate(self.step):
            for name, value in step.headers.items():
                for var in scan(value).names:
                    uses.setdefault(var, f"header {name} of step[{i}]")
        return uses

    def labels(self) -> list[str]:
        """Each step's name in the run's tables: `<flow>/<step name or METHOD path>`."""
        return [f"{self.name}/{s.label()}" for s in self.step]
