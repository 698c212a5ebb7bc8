"""The plan's TOML: durations, the strict base model, and parsing a TOML text into a
model with errors that name the file, the line and the field."""

from __future__ import annotations

import re
import tomllib
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldError(ValueError):
    """A check across fields that names the field at fault, relative to its model:
    the plan error then points at that field's line."""

    def __init__(self, loc: str | tuple, message: str) -> None:
        super().__init__(message)
        self.loc = (loc,) if isinstance(loc, str | int) else tuple(loc)


class PlanError(ValueError):
    """A plan that cannot run, with where the problem is."""


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
