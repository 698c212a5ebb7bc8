"""The plan file: what to load, how to step it, and which components to watch.

A plan is TOML. Errors name the file, the line and the field, before any load is sent.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pinchpoint.collect.formats import known_formats
from pinchpoint.collect.prometheus_plan import Prometheus, check_series_names
from pinchpoint.sla import Sla

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: object) -> float:
    """Seconds from a number of seconds or a string such as "500ms", "6s", "2m"."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '6s' or '500ms'")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    else:
        raise ValueError(f"{value!r} is not a duration (use seconds, or '500ms', '6s', '2m', '1h')")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
_M = TypeVar("_M", bound=BaseModel)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _http_version(value: object) -> object:
    """`http = "2"`, `http = 2` or `http = 1.1` (TOML numbers) all name a version."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (1.1, 2):
        return "2" if value == 2 else "1.1"
    return value


class Target(_Strict):
    url: str
    tag: bool = True
    # HTTP/1.1, or HTTP/2: with prior knowledge (h2c) on http://, by ALPN on https://.
    http: Annotated[Literal["1.1", "2"], BeforeValidator(_http_version)] = "1.1"
    # https: PEM certificates trusted besides the default roots, or no check at all.
    ca_file: str | None = None
    insecure: bool = False
    # HTTP/2: users (open loop: requests in flight) sharing one connection; by default
    # one connection per user, 100 streams per connection in open loop.
    streams_per_connection: int | None = Field(default=None, ge=1)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} must be http(s)://host[:port][/path]")
        return url

    @field_validator("ca_file")
    @classmethod
    def _check_ca_file(cls, path: str | None) -> str | None:
        if path is None:
            return None
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
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

    def engine_protocol(self) -> dict:
        """How the engine reaches the target (its `protocol` config)."""
        return {
            "http": self.http,
            "tls": self.tls,
            "ca_file": self.ca_file,
            "insecure": self.insecure,
            "streams_per_connection": self.streams_per_connection or 0,
        }

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


class FieldError(ValueError):
    """A check across fields that names the field at fault, relative to its model:
    the plan error then points at that field's line."""

    def __init__(self, loc: str | tuple, message: str) -> None:
        super().__init__(message)
        self.loc = (loc,) if isinstance(loc, str | int) else tuple(loc)


MAX_RATE = 1_000_000.0  # requests per second
MAX_COUNT = 1_000_000_000


def _think(value: object) -> object:
    """A bare duration is a constant think time."""
    return value if isinstance(value, dict) else {"constant": value}


class ThinkTime(_Strict):
    """Closed loop: a user's pause between a response and its next request, one of
    `constant`, `uniform = [min, max]` or `exponential = mean`."""

    constant: Duration | None = None
    uniform: tuple[Duration, Duration] | None = None
    exponential: Duration | None = None

    @model_validator(mode="after")
    def _one(self) -> ThinkTime:
        given = [n for n in ("constant", "uniform", "exponential") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("set one of constant, uniform = [min, max] or exponential = mean")
        if self.uniform is not None and self.uniform[0] > self.uniform[1]:
            raise FieldError(
                "uniform",
                f"the minimum ({self.uniform[0]:g}s) is above the maximum ({self.uniform[1]:g}s)",
            )
        return self

    def engine(self) -> dict:
        if self.uniform is not None:
            return {
                "kind": "uniform",
                "value_s": 0.0,
                "min_s": self.uniform[0],
                "max_s": self.uniform[1],
            }
        if self.exponential is not None:
            return {"kind": "exponential", "value_s": self.exponential, "min_s": 0.0, "max_s": 0.0}
        return {"kind": "constant", "value_s": self.constant or 0.0, "min_s": 0.0, "max_s": 0.0}


Think = Annotated[ThinkTime, BeforeValidator(_think)]
Rate = Annotated[float, Field(ge=0, le=MAX_RATE)]


class Stage(_Strict):
    """Closed loop: go linearly from the previous stage's users (0 before the first) to
    `users` over `ramp`, then hold them for `hold`."""

    users: int = Field(ge=0)
    ramp: Duration = 0.0
    hold: Duration = 0.0

    @model_validator(mode="after")
    def _some_time(self) -> Stage:
        if self.ramp == 0 and self.hold == 0:
            raise FieldError("hold", "a stage needs a ramp or a hold above zero")
        return self


class Phase(_Strict):
    """Open loop, as Artillery's phases: `arrival_rate` for `duration`; with `ramp_to`,
    linearly from arrival_rate to ramp_to; `arrival_count` spread over `duration`;
    or `pause` (no request for that long)."""

    name: str | None = None
    duration: Duration | None = None
    arrival_rate: Rate | None = None
    ramp_to: Rate | None = None
    arrival_count: int | None = Field(default=None, ge=0, le=MAX_COUNT)
    pause: Duration | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> Phase:
        if self.pause is not None:
            for other in ("duration", "arrival_rate", "ramp_to", "arrival_count"):
                if getattr(self, other) is not None:
                    raise FieldError(other, "a pause phase has only a name and its pause")
            if self.pause <= 0:
                raise FieldError("pause", "a pause must last more than zero seconds")
            return self
        if self.ramp_to is not None and self.arrival_rate is None:
            raise FieldError(
                "ramp_to", "a ramp goes from arrival_rate to ramp_to: set arrival_rate"
            )
        if self.arrival_rate is None and self.arrival_count is None:
            raise ValueError(
                "a phase needs arrival_rate (and ramp_to for a ramp), arrival_count, or pause"
            )
        if self.arrival_rate is not None and self.arrival_count is not None:
            raise FieldError("arrival_count", "set arrival_rate or arrival_count, not both")
        if self.duration is None:
            raise FieldError("duration", "the phase needs a duration")
        if self.duration <= 0:
            raise FieldError("duration", "a phase must last more than zero seconds")
        return self

    @property
    def seconds(self) -> float:
        return self.pause if self.pause is not None else self.duration or 0.0

    def rate(self) -> float:
        """The phase's mean target rate, requests per second."""
        if self.pause is not None:
            return 0.0
        if self.arrival_count is not None:
            return self.arrival_count / self.seconds
        start = self.arrival_rate or 0.0
        end = self.ramp_to if self.ramp_to is not None else start
        return (start + end) / 2


@dataclass(frozen=True)
class Level:
    """A step or phase of the plan as the engine runs it and the analysis reads it."""

    index: int
    # "users" (closed loop) or "rate" (open loop, requests per second)
    kind: str
    # users, or the target rate; the mean over a ramp
    level: float
    duration: float
    name: str | None = None
    # closed loop: users at the end of the step, and where a ramp starts
    users: int = 0
    ramp_from: int | None = None
    # open loop
    phase: Phase | None = None


def _open_only(load: Load, fields: tuple[str, ...]) -> None:
    for name in fields:
        if name in load.model_fields_set:
            raise FieldError(
                name,
                f'{name} is open loop only: add [[load.phase]], or loop = "open" to a step plan',
            )


class Load(_Strict):
    """How the load goes. Closed loop (users that wait for each answer): a step plan
    (`lower` to `upper` users by `step`, each for `duration`), `users` for `duration`,
    or `[[load.stage]]` ramps and holds. Open loop (requests at a scheduled rate,
    answered or not): `[[load.phase]]` as Artillery has them, or `loop = "open"` with a
    step plan in requests per second."""

    loop: Literal["closed", "open"] | None = None
    lower: float | None = Field(default=None, gt=0)
    upper: float | None = Field(default=None, gt=0)
    step: float = Field(default=1, gt=0)
    duration: Duration | None = None
    users: int | None = Field(default=None, ge=1)
    stage: list[Stage] = Field(default_factory=list)
    phase: list[Phase] = Field(default_factory=list)
    think_time: Think = ThinkTime(constant=0.0)
    arrivals: Literal["uniform", "poisson"] = "uniform"
    seed: int = Field(default=1, ge=0, lt=2**64)
    max_in_flight: int = Field(default=1000, ge=1, le=1_000_000)
    timeout: Duration = Field(default=10.0, gt=0)
    warmup: Duration = 0.5
    threads: int = Field(default=0, ge=0)
    # A step plan of users searched for its knee (load/find_knee.py) instead of run whole.
    find_knee: bool = False

    @property
    def open(self) -> bool:
        return self.loop == "open" or (self.loop is None and bool(self.phase))

    @model_validator(mode="after")
    def _check_shape(self) -> Load:
        stepped = self.lower is not None or self.upper is not None
        shapes = [
            name
            for name, given in (
                ("lower", stepped),
                ("users", self.users is not None),
                ("stage", bool(self.stage)),
                ("phase", bool(self.phase)),
            )
            if given
        ]
        if not shapes:
            raise ValueError(
                "set lower, upper and duration (a step plan), users and duration, "
                "[[load.stage]] or [[load.phase]]"
            )
        if len(shapes) > 1:
            loc = (shapes[1], 0) if shapes[1] in ("stage", "phase") else shapes[1]
            raise FieldError(loc, f"{shapes[1]} cannot go with {shapes[0]}: choose one load shape")
        if self.find_knee:
            self._check_find_knee(stepped)
        if self.loop == "closed" and self.phase:
            raise FieldError("loop", 'arrival phases are open loop: remove loop = "closed"')
        if self.open and (self.stage or self.users is not None):
            field = "stage" if self.stage else "users"
            raise FieldError("loop", f'{field} is closed loop: remove loop = "open"')
        if stepped:
            self._check_steps()
        elif self.users is not None and self.duration is None:
            raise FieldError("users", "users need a duration")
        elif (self.stage or self.phase) and self.duration is not None:
            raise FieldError("duration", "stages and phases have their own durations")
        if self.open and "think_time" in self.model_fields_set:
            raise FieldError(
                "think_time", "think time is closed loop: an open-loop schedule waits for no answer"
            )
        if not self.open:
            _open_only(self, ("arrivals", "max_in_flight"))
        for level in self.levels():
            if level.phase is not None and level.phase.pause is not None:
                continue
            if self.warmup >= level.duration:
                what = "phase" if self.open else "step"
                raise FieldError(
                    "warmup",
                    f"warmup ({self.warmup:g}s) must be shorter than each {what}: "
                    f"{what} {level.index} lasts {level.duration:g}s",
                )
        return self

    def _check_find_knee(self, stepped: bool) -> None:
        if self.open:
            raise FieldError(
                "find_knee",
                "find_knee steps closed-loop users: it does not go with open loop "
                '(loop = "open" or [[load.phase]])',
            )
        if not stepped:
            raise FieldError(
                "find_knee",
                "find_knee searches the users between lower and upper: "
                "set lower, upper and duration instead of users or [[load.stage]]",
            )
        if self.lower is not None and self.upper is not None and self.upper <= self.lower:
            raise FieldError(
                "upper",
                f"find_knee needs upper above lower ({self.lower:g}): there is nothing to search",
            )

    def _check_steps(self) -> None:
        if self.lower is None or self.upper is None:
            raise FieldError(
                "upper" if self.upper is None else "lower", "a step plan needs lower and upper"
            )
        if self.duration is None:
            raise ValueError("a step plan needs a duration")
        if self.duration <= 0:
            raise FieldError("duration", "duration must be above zero")
        if self.upper < self.lower:
            raise FieldError("upper", f"upper ({self.upper:g}) is below lower ({self.lower:g})")
        if not self.open:
            for name in ("lower", "upper", "step"):
                value = getattr(self, name)
                if value != int(value):
                    raise FieldError(name, f"{name} counts users: a whole number, not {value:g}")
        elif self.upper > MAX_RATE:
            raise FieldError("upper", f"at most {MAX_RATE:g} requests per second")
        if (self.upper - self.lower) / self.step > 10_000:
            raise FieldError("step", "more than 10 000 steps")

    def step_users(self) -> list[int]:
        """Users of each closed-loop step (at the end of a ramp); empty for open loop."""
        return [lv.users for lv in self.levels()] if not self.open else []

    def levels(self) -> list[Level]:
        """Every step or phase in order, as a load level."""
        if self.lower is not None and self.upper is not None and self.duration is not None:
            count = int((self.upper - self.lower) / self.step + 1e-9) + 1
            values = [self.lower + k * self.step for k in range(count)]
            if self.open:
                return [
                    Level(
                        i,
                        "rate",
                        v,
                        self.duration,
                        phase=Phase(duration=self.duration, arrival_rate=v),
                    )
                    for i, v in enumerate(values)
                ]
            return [Level(i, "users", v, self.duration, users=int(v)) for i, v in enumerate(values)]
        if self.users is not None and self.duration is not None:
            return [Level(0, "users", float(self.users), self.duration, users=self.users)]
        if self.stage:
            out: list[Level] = []
            before = 0
            for n, s in enumerate(self.stage, start=1):
                if s.ramp > 0:
                    out.append(
                        Level(
                            len(out),
                            "users",
                            (before + s.users) / 2,
                            s.ramp,
                            name=f"stage {n}: ramp {before} → {s.users} users",
                            users=s.users,
                            ramp_from=before,
                        )
                    )
                if s.hold > 0:
                    out.append(
                        Level(
                            len(out),
                            "users",
                            float(s.users),
                            s.hold,
                            name=f"stage {n}: hold {s.users} users",
                            users=s.users,
                        )
                    )
                before = s.users
            return out
        return [
            Level(i, "rate", p.rate(), p.seconds, name=p.name, phase=p)
            for i, p in enumerate(self.phase)
        ]


class Request(_Strict):
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
            raise ValueError(f"path {self.path!r} must start with '/'")
        return self


class Log(_Strict):
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


class Process(_Strict):
    """Which processes make up a component: exactly one of pid_file, pids or name."""

    pid_file: str | None = None
    pids: list[int] = Field(default_factory=list)
    name: str | None = None

    @model_validator(mode="after")
    def _one_selector(self) -> Process:
        if sum((self.pid_file is not None, bool(self.pids), self.name is not None)) != 1:
            raise ValueError("set exactly one of pid_file, pids or name")
        return self


class Component(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    role: str = "service"
    calls: list[str] = Field(default_factory=list)
    workers: int | None = Field(default=None, ge=1)
    log: Log | None = None
    process: Process | None = None
    # The [[agent]] that collects this component; None: collected on this host.
    host: str | None = None

    @model_validator(mode="after")
    def _remote_has_no_files(self) -> Component:
        if self.host is not None and (self.log is not None or self.process is not None):
            raise ValueError(
                f"component {self.name!r} is on agent {self.host!r}: its log and process "
                "are set in that agent's config, not in the plan"
            )
        return self


class Agent(_Strict):
    """A `pinchpoint agent` collecting the components whose `host` is its name."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    url: str
    token: str | None = None
    token_env: str | None = None
    # CA bundle (or the agent's own certificate) to verify an https agent with.
    ca_file: str | None = None
    timeout: Duration = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} must be http(s)://host:port")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _one_token(self) -> Agent:
        if self.token is not None and self.token_env is not None:
            raise ValueError("set token or token_env, not both")
        return self

    def bearer(self) -> str | None:
        """The token to send, read from the environment for token_env; raises PlanError
        when that variable is not set."""
        if self.token_env is None:
            return self.token
        value = os.environ.get(self.token_env, "").strip()
        if not value:
            raise PlanError(
                f"agent {self.name!r}: environment variable {self.token_env} is not set"
            )
        return value


class Sampling(_Strict):
    interval: Duration = Field(default=1.0, ge=0.1, le=10.0)


class Plan(_Strict):
    target: Target
    load: Load
    request: list[Request] = Field(min_length=1)
    component: list[Component] = Field(default_factory=list)
    sampling: Sampling = Sampling()
    agent: list[Agent] = Field(default_factory=list)
    # Resource series read from Prometheus servers after the run (collect/prometheus.py).
    prometheus: list[Prometheus] = Field(default_factory=list)
    # Service level objectives, checked after the run (pinchpoint.sla).
    sla: Sla | None = None

    @model_validator(mode="after")
    def _check_weights(self) -> Plan:
        if not any(r.weight for r in self.request):
            raise FieldError(
                ("request", 0, "weight"), "every request has weight 0: nothing to send"
            )
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
    def _check_prometheus(self) -> Plan:
        check_series_names(self.prometheus, [c.name for c in self.component])
        return self

    def tiers(self) -> list[str]:
        """Component names ordered from the entry tier to the leaves."""
        called = {callee for c in self.component for callee in c.calls}
        calls = {c.name: c.calls for c in self.component}
        order: list[str] = []
        todo = [c.name for c in self.component if c.name not in called]
        while todo:
            name = todo.pop(0)
            if name not in order:
                order.append(name)
                todo.extend(calls[name])
        order.extend(c.name for c in self.component if c.name not in order)
        return order


class PlanError(ValueError):
    """A plan that cannot run, with where the problem is."""


def load_plan(path: Path) -> Plan:
    text = path.read_text(encoding="utf-8")
    return parse_plan(text, str(path))


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    return parse_toml(Plan, text, source)


def parse_toml(model: type[_M], text: str, source: str, error: type[ValueError] = PlanError) -> _M:
    """A TOML text validated into `model`; `error` names the file, line and field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{source}: {e}") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        lines = _key_lines(text)
        messages = []
        for err in e.errors():
            loc = tuple(err["loc"])
            msg = err["msg"]
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, FieldError):
                loc, msg = loc + cause.loc, str(cause)
            field = _dotted(loc)
            line = _nearest_line(lines, loc)
            where = f"{source}:{line}" if line else source
            messages.append(f"{where}: {field or 'plan'}: {msg}")
        raise error("\n".join(messages)) from None


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_TABLE = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


def _key_lines(text: str) -> dict[tuple, int]:
    """Maps each table and key path of a TOML text to the line where it appears."""
    found: dict[tuple, int] = {}
    counters: dict[tuple, int] = {}
    current: tuple = ()
    for number, line in enumerate(text.splitlines(), start=1):
        if m := _TABLE.match(line):
            names = tuple(p.strip().strip("\"'") for p in m.group(2).split("."))
            if m.group(1) == "[[":
                index = counters.get(names, -1) + 1
                counters[names] = index
                current = (*names, index)
            else:
                resolved: list = []
                for name in names:
                    resolved.append(name)
                    if tuple(n for n in resolved if isinstance(n, str)) in counters:
                        resolved.append(counters[tuple(n for n in resolved if isinstance(n, str))])
                current = tuple(resolved)
            found.setdefault(current, number)
        elif m := _KEY.match(line):
            found.setdefault((*current, m.group(1).strip('"')), number)
    return found


def _nearest_line(lines: dict[tuple, int], loc: tuple) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
