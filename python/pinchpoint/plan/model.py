"""The plan file: what to load, how to step it, and which components to watch.

A plan is TOML. Errors name the file, the line and the field, before any load is sent.
The load models live in `load_models.py`, the TOML parsing and its errors in `toml.py`;
both are re-exported here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from pinchpoint.logformats import get_parser, known_formats
from pinchpoint.plan.database import Database
from pinchpoint.plan.flows import BUILTIN_VARS, Flow, request_templates, template_fault
from pinchpoint.plan.generators import Generators
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
from pinchpoint.plan.profile import Profile
from pinchpoint.plan.prometheus import Prometheus, check_series_names
from pinchpoint.plan.sla import Sla
from pinchpoint.plan.toml import (
    Duration,
    FieldError,
    PlanError,
    Strict,
    field_line,
    parse_duration,
    parse_toml,
    read_text_file,
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
    "with_find_knee",
]


# The largest plan file read: plans are a few KB.
MAX_PLAN_BYTES = 1 << 20
# The most of a ca_file read to find a certificate in: bundles are a few hundred KB.
MAX_CA_BYTES = 16 << 20
# An HTTP method or header name (RFC 9110 token).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# What cannot go into a request line unescaped: space and control characters.
_NOT_IN_URL = re.compile(r"[\x00-\x20\x7f]")
# What cannot go into a header value: control characters but tab (a CR or LF splits it).
_NOT_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _unsafe(
    pattern: re.Pattern[str],
    text: str,
    what: str,
    fix: str = "escape it (%20) or remove it",
    quote: bool = True,
) -> None:
    """ValueError naming the first character of `text` that `pattern` finds; the text is
    quoted unless it may be a secret (`quote` False: a header's value)."""
    if m := pattern.search(text):
        said = f"{what} {text!r}" if quote else f"{what} the value"
        raise ValueError(f"{said} holds {m.group()!r} at character {m.start() + 1}: {fix}")


def check_url(url: str, shape: str = "http(s)://host[:port][/path]") -> str:
    """An http(s) URL with a host, a port from 1 to 65535 and no space or control
    character; raises ValueError saying what is wrong."""
    _unsafe(_NOT_IN_URL, url, "the URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{url!r} is not a URL ({e}): it must be {shape}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} must be {shape}")
    if port == 0:
        raise ValueError(f"{url!r}: port 0 cannot be connected to; ports go from 1 to 65535")
    return url


def _http_version(value: object) -> object:
    """`http = "2"`, `http = 2` or `http = 1.1` (TOML numbers) all name a version."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (1.1, 2):
        return "2" if value == 2 else "1.1"
    return value


class Target(Strict):
    url: str
    tag: bool = True
    # HTTP/1.1, or HTTP/2: with prior knowledge (h2c) on http://, by ALPN on https://.
    http: Annotated[Literal["1.1", "2"], BeforeValidator(_http_version)] = "1.1"
    # https: PEM certificates trusted besides the default roots, or no check at all.
    ca_file: str | None = None
    insecure: bool = False
    # HTTP/2: users (open loop: requests in flight) sharing one connection; by default
    # one connection per user, 100 streams per connection in open loop.
    streams_per_connection: int | None = Field(default=None, ge=1, le=10_000)
    # Request headers whose values are secret besides Authorization, Cookie and
    # Proxy-Authorization: sent as written, stored redacted in the run folder.
    secret_headers: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        return check_url(url)

    @field_validator("secret_headers")
    @classmethod
    def _check_secret_headers(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not _TOKEN.match(name):
                raise FieldError(index, f"{name!r} is not a header name: no space, colon or CR/LF")
        return names

    @field_validator("ca_file")
    @classmethod
    def _check_ca_file(cls, path: str | None) -> str | None:
        if path is None:
            return None
        file = Path(path)
        try:
            if file.exists() and not file.is_file():  # /dev/zero, a FIFO: read without end
                raise ValueError(f"{path} is not a file: a PEM file of certificates")
            with file.open("rb") as f:
                text = f.read(MAX_CA_BYTES).decode("utf-8", errors="replace")
        except OSError as e:
            raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise ValueError(f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        return path

    @model_validator(mode="after")
    def _check_tls(self) -> Target:
        if not self.tls and (self.ca_file is not None or self.insecure):
            field = "ca_file" if self.ca_file is not None else "insecure"
            raise FieldError(field, f"{field} applies to https:// URLs; the URL is http://")
        if self.insecure and self.ca_file is not None:
            raise FieldError(
                "insecure", "insecure turns certificate checks off: remove it or ca_file"
            )
        if self.streams_per_connection is not None and self.http != "2":
            raise FieldError("streams_per_connection", 'streams per connection need http = "2"')
        return self

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or (443 if self.tls else 80)

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


class Request(Strict):
    path: str
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""
    # How often this request is sent against the plan's others (0: never).
    weight: int = Field(default=1, ge=0, le=10_000)
    # This request's own timeout, instead of [load] timeout.
    timeout: Duration | None = None

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("a timeout must be above zero")
        return value

    @model_validator(mode="after")
    def _check_path(self) -> Request:
        if not self.path.startswith("/"):
            raise FieldError("path", f"path {self.path!r} must start with '/'")
        try:
            _unsafe(_NOT_IN_URL, self.path, "the path")
        except ValueError as e:
            raise FieldError("path", str(e)) from None
        if not _TOKEN.match(self.method):
            raise FieldError(
                "method", f"{self.method!r} is not an HTTP method: letters, no space (GET, POST)"
            )
        for name, value in self.headers.items():
            if not _TOKEN.match(name):
                raise FieldError(
                    ("headers", name), f"{name!r} is not a header name: no space, colon or CR/LF"
                )
            try:
                fix = "a CR or LF would end the header"
                _unsafe(_NOT_IN_HEADER, value, f"header {name}:", fix, quote=False)
            except ValueError as e:
                raise FieldError(("headers", name), str(e)) from None
        return self


class Log(Strict):
    path: str
    format: str
    log_format: str | None = None

    @field_validator("format")
    @classmethod
    def _known_format(cls, name: str) -> str:
        known = known_formats()
        if name not in known:
            raise ValueError(f"unknown log format {name!r}; known formats: {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _compiles(self) -> Log:
        # Compiled now so a format that cannot parse stops the plan, not the run's end.
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
    # A PostgreSQL server sampled from inside during the run (plan/database.py).
    database: Database | None = None

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
            request_templates(r.path, r.headers, r.body),
            set(BUILTIN_VARS),
            "is not a built-in (user_index, iteration): beside flows, a request is a template",
        )
        if fault is not None:
            raise FieldError(("request", i, *fault[0]), fault[1])


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
    # Load generators on a Ray cluster (plan/generators.py, load/distributed/).
    generators: Generators = Generators()
    # Hot functions of the Python tiers sampled during one step (plan/profile.py).
    profile: Profile | None = None

    @model_validator(mode="after")
    def _check_weights(self) -> Plan:
        if self.load.locustfile is not None:
            pass  # the locustfile's users send the requests
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
        if self.flow:
            _check_request_templates(self.request)
        if self.load.hook is not None and not any(s.hook for f in self.flow for s in f.step):
            raise FieldError(("load", "hook"), "no flow step has hook = true to call it")
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
    def _check_prometheus(self) -> Plan:
        check_series_names(self.prometheus, [c.name for c in self.component])
        return self

    def endpoints(self) -> list[str]:
        """The name of each request in the run's records (their `endpoint` index): the
        plan's requests as `METHOD path`, then each flow's steps as `flow/step`."""
        names = [f"{r.method} {r.path}" for r in self.request]
        return names + [label for f in self.flow for label in f.labels()]

    def tiers(self) -> list[str]:
        """Component names ordered from the entry tier to the leaves."""
        return entry_first({c.name: list(c.calls) for c in self.component})


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


def with_find_knee(plan: Plan, text: str, source: str) -> Plan:
    """The plan with its users searched for the knee (`--find-knee`). Raises PlanError
    naming the file, the line of [load] and the field when its load cannot be searched."""
    if plan.load.find_knee:
        return plan
    try:
        load = plan.load.searching_knee()
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
    return plan.model_copy(update={"load": load})


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    if not text.strip():
        raise PlanError(f"{source}: the plan is empty: it needs [target], [load] and [[request]]")
    return parse_toml(Plan, text, source)
