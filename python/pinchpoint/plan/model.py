"""The plan file: what to load, how to step it, and which components to watch.

A plan is TOML. Errors name the file, the line and the field, before any load is sent.
The load models live in `load_models.py`, the target and requests in `http.py`, the TOML
parsing in `toml.py`; they are re-exported here.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator, model_validator

from pinchpoint.plan.abort import AbortRules
from pinchpoint.plan.database import Database
from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.flows import Flow, request_templates, template_fault, unreadable_template
from pinchpoint.plan.generators import Generators
from pinchpoint.plan.grpc import data_text
from pinchpoint.plan.http import Request, Target, check_url
from pinchpoint.plan.kinds import record_kinds
from pinchpoint.plan.load_models import (
    MAX_COUNT,
    MAX_RATE,
    MAX_THREADS,
    MAX_USERS,
    Level,
    Load,
    Phase,
    Rate,
    Stage,
    Think,
    ThinkTime,
)
from pinchpoint.plan.otlp import Otlp
from pinchpoint.plan.output import Output
from pinchpoint.plan.profile import Profile
from pinchpoint.plan.prometheus import Prometheus, check_series_names
from pinchpoint.plan.redis import Redis
from pinchpoint.plan.sla import Sla
from pinchpoint.plan.templates import BUILTIN_VARS
from pinchpoint.plan.toml import (
    Duration,
    FieldError,
    Strict,
    field_line,
    parse_duration,
    parse_toml,
    read_text_file,
    validate_data,
)

__all__ = [
    "MAX_COUNT",
    "MAX_RATE",
    "MAX_THREADS",
    "MAX_USERS",
    "Agent",
    "Component",
    "Duration",
    "FieldError",
    "Level",
    "Load",
    "Log",
    "Phase",
    "Plan",
    "PlanError",
    "Process",
    "Rate",
    "Request",
    "Sampling",
    "Stage",
    "Target",
    "Think",
    "ThinkTime",
    "check_url",
    "load_plan",
    "parse_duration",
    "parse_plan",
    "parse_toml",
    "read_plan_text",
]


# The largest plan file read: plans are a few KB.
MAX_PLAN_BYTES = 1 << 20


class Log(Strict):
    path: str
    format: str
    log_format: str | None = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, name: str) -> str:
        # Imported here: a plan with no logs (`pinchpoint load URL`) starts without them.
        from pinchpoint.logformats import known_formats

        known = known_formats()
        if name not in known:
            raise ValueError(f"unknown log format {name!r}; known formats: {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _compiles(self) -> Log:
        # Compiled now so a format that cannot parse stops the plan, not the run's end.
        from pinchpoint.logformats import get_parser

        try:
            get_parser(self.format, self.log_format)
        except Exception as e:  # any failure to compile is the plan's fault
            message = str(e) or type(e).__name__
            raise FieldError("log_format", f"does not compile: {message}") from None
        return self


class Process(Strict):
    """Which processes make up a component: exactly one of pid_file, pids or name."""

    pid_file: str | None = None
    pids: list[Annotated[int, Field(ge=1, le=4_194_304)]] = Field(default_factory=list)
    name: str | None = None

    @model_validator(mode="after")
    def _one_selector(self) -> Process:
        if sum((self.pid_file is not None, bool(self.pids), self.name is not None)) != 1:
            raise ValueError("set exactly one of pid_file, pids or name")
        return self


class Component(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    role: str = "service"
    calls: list[str] = Field(default_factory=list)
    workers: int | None = Field(default=None, ge=1, le=100_000)
    log: Log | None = None
    process: Process | None = None
    # The [[agent]] that collects this component; None: collected on this host.
    host: str | None = None
    # A PostgreSQL or MySQL server sampled from inside during the run (plan/database.py).
    database: Database | None = None
    # A Redis server sampled from inside during the run (plan/redis.py).
    redis: Redis | None = None

    @model_validator(mode="after")
    def _remote_has_no_files(self) -> Component:
        if self.host is not None and (self.log is not None or self.process is not None):
            raise ValueError(
                f"component {self.name!r} is on agent {self.host!r}: its log and process "
                "are set in that agent's config, not in the plan"
            )
        return self


class Agent(Strict):
    """A `pinchpoint agent` collecting the components whose `host` is its name."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    url: str
    # The environment variable holding the agent's token: the plan holds no secret.
    token_env: str | None = None
    # CA bundle (or the agent's own certificate) to verify an https agent with.
    ca_file: str | None = None
    timeout: Duration = Field(default=10.0, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _no_token(cls, data: object) -> object:
        if isinstance(data, dict) and "token" in data:
            raise FieldError(
                "token",
                "the plan holds no secret: name the environment variable that holds the "
                "token with token_env",
            )
        return data

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        return check_url(url, "http(s)://host:port").rstrip("/")

    def bearer(self) -> str | None:
        """The token to send, read from the environment for token_env; raises PlanError
        when that variable is not set."""
        if self.token_env is None:
            return None
        value = os.environ.get(self.token_env, "").strip()
        if not value:
            raise PlanError(
                f"agent {self.name!r}: environment variable {self.token_env} is not set"
            )
        return value


class Sampling(Strict):
    interval: Duration = Field(default=1.0, ge=0.1, le=10.0)


def _check_request_templates(requests: list[Request]) -> None:
    """Beside flows, a request is sent as a flow of one step: its `${...}` are templates."""
    for i, r in enumerate(requests):
        fault = template_fault(
            _templates(r),
            set(BUILTIN_VARS),
            "is not a built-in (user_index, iteration): beside flows, a request is a template",
        )
        if fault is not None:
            raise FieldError(("request", i, *fault[0]), fault[1])


def _templates(r: Request) -> list[tuple[tuple, str]]:
    """A request's texts that may hold `${name}`: a gRPC call's are its data's."""
    if r.grpc is None:
        return request_templates(r.path, r.headers, r.body)
    return [(("data",), data_text(r.data))] + [(("headers", k), v) for k, v in r.headers.items()]


def _check_readable_templates(requests: list[Request]) -> None:
    """A `${` without its `}` is refused in every request, as in a flow's step: beside
    flows a request is a template, alone it would be sent as written, the brace lost."""
    for i, r in enumerate(requests):
        if (fault := unreadable_template(_templates(r))) is not None:
            raise FieldError(("request", i, *fault[0]), fault[1])


def _check_open_calls(requests: list[Request]) -> None:
    """An open-loop arrival has no variables: a gRPC call's data is sent as written."""
    for i, r in enumerate(requests):
        if r.grpc is None:
            continue
        fault = template_fault(
            _templates(r), set(), "is not set: an open-loop arrival has no variables"
        )
        if fault is not None:
            raise FieldError(("request", i, *fault[0]), fault[1])


def _check_messages(requests: list[Request], open_loop: bool) -> None:
    """A WebSocket request's messages: in open loop an arrival has no variables, so its
    frames hold none and nothing would read a capture; in closed loop it is a flow of
    one step, with the built-ins."""
    usable = set() if open_loop else set(BUILTIN_VARS)
    unset = (
        "is not set: an open-loop arrival has no variables (`$${` is a literal `${`)"
        if open_loop
        else "is not a built-in (user_index, iteration): a request's message is a template"
    )
    for i, r in enumerate(requests):
        for k, m in enumerate(r.message):
            fault = template_fault(m.templates(), usable, unset)
            if fault is not None:
                raise FieldError(("request", i, "message", k, *fault[0]), fault[1])
            if open_loop and m.capture:
                raise FieldError(
                    ("request", i, "message", k, "capture"),
                    "an open-loop arrival keeps no variables: nothing would read a capture",
                )


class Plan(Strict):
    target: Target
    load: Load
    request: list[Request] = Field(default_factory=list)
    # User journeys (plan/flows.py): sequences of requests with captures and checks.
    flow: list[Flow] = Field(default_factory=list, max_length=100)
    component: list[Component] = Field(default_factory=list)
    sampling: Sampling = Sampling()
    agent: list[Agent] = Field(default_factory=list)
    # Resource series read from Prometheus servers after the run (collect/sources/prometheus.py).
    prometheus: list[Prometheus] = Field(default_factory=list)
    # Spans received over OTLP during the run (collect/sources/otlp.py).
    otlp: list[Otlp] = Field(default_factory=list, max_length=8)
    # Service level objectives, checked after the run (pinchpoint.analyze.sla).
    sla: Sla | None = None
    # Metrics of each second that stop the run past a limit (plan/abort.py).
    abort: AbortRules = Field(default_factory=list)
    # Load generators on a Ray cluster (plan/generators.py, load/distributed/).
    generators: Generators = Generators()
    # Hot functions of the Python tiers sampled during one step (plan/profile.py).
    profile: Profile | None = None
    # What the run serves while it goes: live metrics and the live page (plan/output.py).
    output: Output = Output()

    @model_validator(mode="after")
    def _check_weights(self) -> Plan:
        if self.load.locustfile is not None:
            if self.flow:  # the locustfile's users send the requests: flows would not run
                raise FieldError(
                    ("flow", 0),
                    "[[flow]] beside a locustfile ([load] locustfile or --locustfile): the "
                    "locustfile's users send every request and the flows would never run; "
                    "keep one of them",
                )
        elif not self.request and not self.flow:
            raise ValueError("no [[request]] and no [[flow]]: nothing to send")
        elif not any(r.weight for r in self.request) and not any(f.weight for f in self.flow):
            where = ("request", 0, "weight") if self.request else ("flow", 0, "weight")
            what = "request and flow" if self.flow else "request"
            raise FieldError(where, f"every {what} has weight 0: nothing to send")
        if self.flow and self.load.open:
            raise FieldError(
                ("flow", 0), "flows run in closed loop: [load] users, steps or stages, not phases"
            )
        _check_readable_templates(self.request)
        if self.flow:
            _check_request_templates(self.request)
        _check_messages(self.request, self.load.open)
        if self.load.open:
            _check_open_calls(self.request)
        else:
            _check_request_templates([r for r in self.request if r.grpc is not None])
        if self.load.hook is not None and not any(s.hook for f in self.flow for s in f.step):
            raise FieldError(("load", "hook"), "no flow step has hook = true to call it")
        ws: list[tuple[str | int, ...]] = [
            ("request", i) for i, r in enumerate(self.request) if r.ws
        ]
        ws += [
            ("flow", i, "step", j)
            for i, f in enumerate(self.flow)
            for j, s in enumerate(f.step)
            if s.ws
        ]
        if ws and self.target.http != "1.1":
            raise FieldError(
                (*ws[0], "ws"), 'a WebSocket upgrade is an HTTP/1.1 request: [target] http = "1.1"'
            )
        calls: list[tuple[str | int, ...]] = [
            ("request", i) for i, r in enumerate(self.request) if r.grpc
        ]
        calls += [
            ("flow", i, "step", j)
            for i, f in enumerate(self.flow)
            for j, s in enumerate(f.step)
            if s.grpc
        ]
        if calls and self.target.http != "2":
            raise FieldError((*calls[0], "grpc"), 'gRPC runs over HTTP/2: [target] http = "2"')
        return self

    @model_validator(mode="after")
    def _check_topology(self) -> Plan:
        names = [c.name for c in self.component]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"component names must be unique: {sorted(dupes)}")
        agents = [a.name for a in self.agent]
        if len(set(agents)) != len(agents):
            raise ValueError(f"agent names must be unique: {sorted(agents)}")
        for c in self.component:
            if c.host is not None and c.host not in agents:
                raise ValueError(
                    f"component {c.name!r} is on host {c.host!r}, which no [[agent]] names"
                )
        for c in self.component:
            for callee in c.calls:
                if callee not in names:
                    raise ValueError(
                        f"component {c.name!r} calls {callee!r}, which the plan does not list"
                    )
        return self

    @model_validator(mode="after")
    def _check_profile(self) -> Plan:
        if self.profile is not None:
            self.profile.check(self.component, self.load.levels())
        return self

    @model_validator(mode="after")
    def _check_sla_kinds(self) -> Plan:
        # An error rate of a kind the run never sends would pass on no records at all.
        if self.sla is None:
            return self
        # A locustfile's records are all requests to the engine's counts.
        sent = ["request"] if self.load.locustfile is not None else self.endpoint_kinds()
        for kind in self.sla.kinds_named():
            if kind not in sent:
                said = ", ".join(dict.fromkeys(sent))
                raise FieldError(
                    ("sla", "error_rate", kind),
                    f"this plan sends no {kind} records: its records are {said}",
                )
        return self

    @model_validator(mode="after")
    def _check_prometheus(self) -> Plan:
        check_series_names(self.prometheus, [c.name for c in self.component])
        return self

    def endpoints(self) -> list[str]:
        """The name of each request in the run's records (their `endpoint` index): the
        plan's requests as `METHOD path`, then each flow's steps as `flow/step`."""
        names = [name for r in self.request for name in r.endpoint_labels(r.label())]
        return names + [label for f in self.flow for label in f.endpoint_labels()]

    def endpoint_kinds(self) -> list[str]:
        """The kind of each record of `endpoints()`, in the same order (plan/kinds.py)."""
        kinds = [kind for r in self.request for kind in record_kinds(r)]
        return kinds + [kind for f in self.flow for s in f.step for kind in record_kinds(s)]

    def tiers(self) -> list[str]:
        """Component names ordered from the entry tier to the leaves."""
        return entry_first({c.name: list(c.calls) for c in self.component})

    def with_find_knee(self, text: str, source: str) -> Plan:
        """The plan with its users searched for the knee (`--find-knee`). Raises PlanError
        naming the file, the line of [load] and the field when its load cannot be searched."""
        if self.load.find_knee:
            return self
        try:
            load = self.load.searching_knee()
        except ValidationError as e:
            messages = []
            for err in e.errors():
                cause = err.get("ctx", {}).get("error")
                loc = cause.loc if isinstance(cause, FieldError) else tuple(err["loc"])
                msg = str(cause) if isinstance(cause, FieldError) else err["msg"]
                line = field_line(text, ("load", *loc))
                where = f"{source}:{line}" if line else source
                field = ".".join(str(part) for part in ("load", *loc))
                messages.append(f"{where}: {field}: --find-knee: {msg}")
            raise PlanError("\n".join(messages)) from None
        return self.model_copy(update={"load": load})

    def with_generators(self, ray: str | None, count: int | None) -> Plan:
        """The plan with its `[generators]` from --ray and --generators."""
        address = ray if ray is not None else self.generators.ray
        if address is None:
            raise PlanError("--generators needs --ray (or [generators] ray in the plan)")
        try:
            wanted = Generators(ray=address, count=count or self.generators.count)
        except ValidationError as e:
            message = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise PlanError(f"--ray: {message}") from None
        return self.model_copy(update={"generators": wanted})

    def with_profile(self, text: str) -> tuple[Plan, str]:
        """The plan with a profile (`run --profile`): its own [profile], or one of defaults,
        then added to its text so the run folder's plan says what ran."""
        if self.profile is not None:
            return self, text
        return self.model_copy(update={"profile": Profile()}), text.rstrip("\n") + "\n\n[profile]\n"

    @classmethod
    def with_locustfile(cls, text: str, source: str, locustfile: Path) -> tuple[Plan, str]:
        """The plan of `text` with `[load] locustfile` set (`--locustfile`), validated as a
        whole (a plan for a locustfile needs no [[request]]), and its text with the line
        added under `[load]`: the run folder's plan says what ran, and reads back alone."""
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError):
            parse_plan(text, source)  # raises the plan's own error
            raise
        if isinstance(data.get("load"), dict):
            data["load"]["locustfile"] = str(locustfile)
        plan = validate_data(cls, data, source, text=text)
        header = re.search(r"(?m)^[ \t]*\[[ \t]*load[ \t]*\][ \t]*(#.*)?$", text)
        if header is None:
            raise PlanError(f"{source}: --locustfile needs a [load] table to record it in")
        line = f"locustfile = {json.dumps(str(locustfile))}"
        return plan, text[: header.end()] + "\n" + line + text[header.end() :]


def entry_first(calls: dict[str, list[str]]) -> list[str]:
    """Names ordered from those nothing calls down to the leaves, breadth first."""
    called = {callee for callees in calls.values() for callee in callees}
    order: list[str] = []
    todo = [name for name in calls if name not in called]
    while todo:
        name = todo.pop(0)
        if name not in order:
            order.append(name)
            todo.extend(calls.get(name, []))
    order.extend(name for name in calls if name not in order)
    return order


def load_plan(path: Path) -> Plan:
    return parse_plan(read_plan_text(path), str(path))


def read_plan_text(path: Path) -> str:
    """A plan file's text; PlanError when it cannot be read, is too large or is not UTF-8."""
    return read_text_file(path, MAX_PLAN_BYTES, "plan", PlanError)


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    if not text.strip():
        raise PlanError(f"{source}: the plan is empty: it needs [target], [load] and [[request]]")
    return parse_toml(Plan, text, source)
