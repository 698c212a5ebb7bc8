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

from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from pinchpoint.plan.answers import NUMERIC, Capture, Check
from pinchpoint.plan.feeds import FeedData, read_columns, read_feed
from pinchpoint.plan.grpc import STREAM_RECORD, data_text, grpc_label
from pinchpoint.plan.http import Request
from pinchpoint.plan.load_models import Think
from pinchpoint.plan.templates import BUILTIN_VARS, element, is_name, scan
from pinchpoint.plan.toml import Duration, FieldError, Strict
from pinchpoint.plan.websocket import Message, message_names, request_label, upgrade_fault

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
    if (unreadable := unreadable_template(templates)) is not None:
        return unreadable
    for loc, text in templates:
        for name in scan(text).names:
            of_list = element(name)
            why = (
                _element_fault(of_list, lists, turn)
                if of_list is not None
                else (None if name in usable else unset)
            )
            if why is not None:
                return loc, f"${{{name}}} {why}"
    return None


def unreadable_template(templates: list[tuple[tuple, str]]) -> tuple[tuple, str] | None:
    """The first template that cannot be read, a `${` without its `}`: (where, why). The
    one check of it, wherever a template may be: a flow's step, a request, a message."""
    for loc, text in templates:
        if (error := scan(text).error) is not None:
            return loc, error
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
    path: str = ""
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
    # A WebSocket step: the request is the upgrade to `ws` (a path, as `path` is), and
    # the connection then carries the messages (plan/websocket.py).
    ws: str | None = None
    message: list[Message] = Field(default_factory=list, max_length=MAX_STEPS)
    # A gRPC call (plan/grpc.py): its method, the .proto declaring it, the request message.
    grpc: str | None = None
    proto: str | None = None
    import_paths: list[str] = Field(default_factory=list, max_length=100)
    data: dict | str | None = None
    _streams: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _request(self) -> FlowStep:
        fields = ["path", "ws", "headers", "body", "grpc", "proto", "import_paths", "data"]
        if self.grpc is None:
            fault = upgrade_fault(self.path, self.ws, self.method, self.body, self.message)
            if fault is not None:
                raise FieldError(*fault)
        else:
            fields.append("message")
            if self.check is not None and self.check.status is not None:
                raise FieldError(
                    ("check", "status"),
                    "a gRPC call's status is its grpc-status: one other than OK is an error "
                    "of class grpc_<status>",
                )
        if "method" in self.model_fields_set:
            fields.append("method")
        try:
            request = Request.model_validate({name: getattr(self, name) for name in fields})
        except ValidationError as e:
            cause = e.errors()[0].get("ctx", {}).get("error")
            if isinstance(cause, FieldError):  # a field of the step's own, named alike
                raise cause from None
            raise
        self._streams = request.streams()
        return self

    def target(self) -> str:
        """The path requested: the upgrade's for a WebSocket, the method's for gRPC."""
        if self.grpc is not None:
            return "/" + self.grpc
        return self.path if self.ws is None else self.ws

    def label(self) -> str:
        if self.grpc is not None:
            return self.name or grpc_label(self.grpc)
        return self.name or request_label(self.method, self.path, self.ws)

    def streams(self) -> bool:
        """A gRPC call answered with a stream of messages."""
        return self._streams

    def streamed(self, label: str) -> list[str]:
        """The record of a gRPC stream's messages after the step's own `label`."""
        return [f"{label}/{STREAM_RECORD}"] if self._streams else []

    def templates(self) -> list[tuple[tuple, str]]:
        found: list[tuple[tuple, str]]
        if self.grpc is not None:
            found = [(("data",), data_text(self.data))] + [
                (("headers", k), v) for k, v in self.headers.items()
            ]
        else:
            found = request_templates(self.target(), self.headers, self.body)
        if self.ws is not None:
            found = [(("ws",) if loc == ("path",) else loc, t) for loc, t in found]
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
            readers = [(("step", i), step.templates(), step.capture)] + [
                (("step", i, "message", k), m.templates(), m.capture)
                for k, m in enumerate(step.message)
            ]
            for where, templates, capture in readers:
                known, lists = _known_after(where, templates, capture, known, lists, step.foreach)
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

    def endpoint_labels(self) -> list[str]:
        """The name of each of the flow's records: each step's, each WebSocket step
        followed by its messages' (`<flow>/<step>/<message name or #number>`)."""
        return [
            name
            for step, label in zip(self.step, self.labels(), strict=True)
            for name in [label, *message_names(label, step.message), *step.streamed(label)]
        ]


def _known_after(
    where: tuple,
    templates: list[tuple[tuple, str]],
    capture: list[Capture],
    known: set[str],
    lists: frozenset[str],
    turn: str | None,
) -> tuple[set[str], frozenset[str]]:
    """The variables and lists known after a step (or message) that reads `templates`
    and captures `capture`; FieldError at `where` for a template it cannot read. Its
    checks may read its own captures."""
    captured = {c.name for c in capture}
    listed = lists | {c.name for c in capture if c.pick == "all"}
    checks = [(loc, t) for loc, t in templates if loc[0] == "check"]
    requests = [(loc, t) for loc, t in templates if loc[0] != "check"]
    for read, usable, readable in ((requests, known, lists), (checks, known | captured, listed)):
        fault = template_fault(read, usable, lists=readable, turn=turn)
        if fault is not None:
            raise FieldError((*where, *fault[0]), fault[1])
    for loc, text in checks:
        numeric = loc[1] == "json" and len(loc) == 4 and loc[3] in NUMERIC
        if numeric and (whole := next((n for n in scan(text).names if n in listed), None)):
            raise FieldError(
                (*where, *loc),
                f"${{{whole}}} is a list, not a number: compare with one of its values "
                f"(${{{whole}[0]}}, ${{{whole}[-1]}})",
            )
    return known | captured, listed
