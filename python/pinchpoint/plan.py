"""The plan file: what to load, how to step it, and which components to watch.

A plan is TOML. Errors name the file, the line and the field, before any load is sent.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated
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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(_Strict):
    url: str
    tag: bool = True

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url!r} must be http://host[:port][/path] (https comes later)")
        return url

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


class Load(_Strict):
    """A closed-loop step plan: users from `lower` to `upper` by `step`, each for `duration`."""

    lower: int = Field(ge=1)
    upper: int = Field(ge=1)
    step: int = Field(default=1, ge=1)
    duration: Duration = Field(gt=0)
    think_time: Duration = 0.0
    timeout: Duration = Field(default=10.0, gt=0)
    warmup: Duration = 0.5
    threads: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_bounds(self) -> Load:
        if self.upper < self.lower:
            raise ValueError(f"upper ({self.upper}) is below lower ({self.lower})")
        if self.warmup >= self.duration:
            raise ValueError(
                f"warmup ({self.warmup}s) must be shorter than duration ({self.duration}s)"
            )
        return self

    def users(self) -> list[int]:
        return list(range(self.lower, self.upper + 1, self.step))


class Request(_Strict):
    path: str
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""

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


class Sampling(_Strict):
    interval: Duration = Field(default=1.0, ge=0.1, le=10.0)


class Plan(_Strict):
    target: Target
    load: Load
    request: list[Request] = Field(min_length=1)
    component: list[Component] = Field(default_factory=list)
    sampling: Sampling = Sampling()

    @model_validator(mode="after")
    def _check_topology(self) -> Plan:
        names = [c.name for c in self.component]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"component names must be unique: {sorted(dupes)}")
        for c in self.component:
            for callee in c.calls:
                if callee not in names:
                    raise ValueError(
                        f"component {c.name!r} calls {callee!r}, which the plan does not list"
                    )
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
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{source}: {e}") from None
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        lines = _key_lines(text)
        messages = []
        for err in e.errors():
            loc = tuple(err["loc"])
            field = _dotted(loc)
            line = _nearest_line(lines, loc)
            where = f"{source}:{line}" if line else source
            messages.append(f"{where}: {field or 'plan'}: {err['msg']}")
        raise PlanError("\n".join(messages)) from None


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
