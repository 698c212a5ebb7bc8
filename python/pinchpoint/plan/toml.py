"""The plan's TOML: durations, the strict base model, and parsing a TOML text into a
model with errors that name the file, the line and the field."""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from pinchpoint.plan.errors import PlanError
from pinchpoint.plan.user_paths import NotUsable, read_input

__all__ = [
    "MAX_DURATION_S",
    "Duration",
    "FieldError",
    "Strict",
    "field_line",
    "parse_duration",
    "parse_toml",
    "read_text_file",
    "validate_data",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# The longest duration a plan may give anything: 30 days.
MAX_DURATION_S = 30 * 86400.0
# Deeper nesting than any plan needs; tomllib recurses per level.
MAX_NESTING = 64


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
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a finite duration")
    if seconds < 0:
        raise ValueError("a duration cannot be negative")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{value!r} is longer than 30 days ({MAX_DURATION_S:g}s)")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
_M = TypeVar("_M", bound=BaseModel)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FieldError(ValueError):
    """A check across fields that names the field at fault, relative to its model:
    the plan error then points at that field's line."""

    def __init__(self, loc: str | int | tuple, message: str) -> None:
        super().__init__(message)
        self.loc = (loc,) if isinstance(loc, str | int) else tuple(loc)


def read_text_file(path: Path, max_bytes: int, what: str, error: type[ValueError]) -> str:
    """A config file's text: `error` naming the file when it cannot be read, is not a
    regular file (a FIFO, a device), holds more than `max_bytes` or is not UTF-8 (then
    with the line, and the byte and its offset)."""
    try:
        data = read_input(path, max_bytes, what)
    except NotUsable as e:
        raise error(str(e)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start}): "
            f"a {what} is a TOML text file"
        ) from None


def parse_toml(model: type[_M], text: str, source: str, error: type[ValueError] = PlanError) -> _M:
    """A TOML text validated into `model`; `error` names the file, line and field."""
    deep = _too_deep(text) if text.count("[") + text.count("{") > MAX_NESTING else None
    if deep is not None:
        raise error(f"{source}:{deep}: arrays or tables nested more than {MAX_NESTING} deep")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{source}: {e}") from None
    except (ValueError, RecursionError) as e:
        # tomllib's int() of a number of more than 4300 digits, or nesting it recursed on.
        raise error(f"{source}: {_first_line(str(e)) or type(e).__name__}") from None
    return validate_data(model, data, source, error, text)


def validate_data(
    model: type[_M],
    data: object,
    source: str,
    error: type[ValueError] = PlanError,
    text: str | None = None,
) -> _M:
    """`data` (TOML's tables, or a plan built in code) validated into `model`; `error`
    names the source, the field, and the line when the TOML `text` is given."""
    try:
        return model.model_validate(data)
    except RecursionError:
        raise error(f"{source}: values nested too deep") from None
    except ValidationError as e:
        lines = _key_lines(text) if text is not None else {}
        messages = []
        for err in e.errors():
            loc = tuple(err["loc"])
            # pydantic's prefix for a validator's ValueError says nothing to a user.
            msg = err["msg"].removeprefix("Value error, ")
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, FieldError):
                loc, msg = loc + cause.loc, str(cause)
            field = _dotted(loc)
            line = _nearest_line(lines, loc)
            where = f"{source}:{line}" if line else source
            messages.append(_first_line(f"{where}: {field or 'plan'}: {msg}"))
        raise error("\n".join(messages)) from None


def field_line(text: str, loc: tuple) -> int | None:
    """The line of a TOML text where the table or key at `loc` (or its nearest parent) is."""
    return _nearest_line(_key_lines(text), loc)


def _first_line(message: str) -> str:
    """A message as one line: control characters (a CR or LF from the plan) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def _too_deep(text: str) -> int | None:
    """The line where brackets and braces open more than MAX_NESTING deep, counted outside
    strings and comments, or None."""
    depth = 0
    line = 1
    quote = ""
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            if quote in ('"', "'"):
                quote = ""
        elif quote:
            if c == "\\" and quote[0] == '"':
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i += len(quote) - 1
        elif c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return line
        elif c in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# A table's name starts and ends with a character that is not a space, so the spaces around
# it are the \s*'s alone: were they the name's too, a line of many spaces (one can be in a
# multi-line string) would take time quadratic in its length.
_NAME = r"[A-Za-z0-9_.\-\"'](?:[A-Za-z0-9_.\-\"' ]*[A-Za-z0-9_.\-\"'])?"
_TABLE = re.compile(rf"^\s*(\[\[?)\s*({_NAME})\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


def _key_lines(text: str) -> dict[tuple, int]:
    """Maps each table and key path of a TOML text to the line where it appears."""
    found: dict[tuple, int] = {}
    counters: dict[tuple, int] = {}
    current: tuple = ()
    # TOML ends a line at LF only: splitlines() would also split at U+0085 or U+2028 in a
    # string, and count lines the plan does not have.
    for number, line in enumerate(text.split("\n"), start=1):
        if m := _TABLE.match(line):
            names = tuple(p.strip().strip("\"'") for p in m.group(2).split("."))
            if m.group(1) == "[[":
                # An array of tables is counted under its parent's current entry:
                # [[flow.step]] restarts at 0 in each [[flow]].
                key = (*_resolve(names[:-1], counters), names[-1])
                index = counters.get(key, -1) + 1
                counters[key] = index
                current = (*key, index)
            else:
                current = _resolve(names, counters)
            found.setdefault(current, number)
        elif m := _KEY.match(line):
            found.setdefault((*current, m.group(1).strip('"')), number)
    return found


def _resolve(names: tuple, counters: dict[tuple, int]) -> tuple:
    """A dotted table name with the current entry of each array of tables in it."""
    resolved: list = []
    for name in names:
        resolved.append(name)
        if tuple(resolved) in counters:
            resolved.append(counters[tuple(resolved)])
    return tuple(resolved)


def _nearest_line(lines: dict[tuple, int], loc: tuple) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
