"""What a flow reads from an answer (a response, or a WebSocket frame): captures that
take values into variables, and checks of what it must say."""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, ValidationError, model_validator

from pinchpoint.plan.templates import BUILTIN_VARS, is_name
from pinchpoint.plan.toml import FieldError, Strict


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
        if kind == "arith":
            error = f"{text!r}: {error} (this compares numbers)"
        raise FieldError(field or kind, error.replace("\n", " "))


Scalar = str | int | float | bool
COMPARISONS = ("gt", "lt", "ge", "le", "equals", "ne", "in", "len")
# The comparisons of numbers: their expected value is arithmetic (flow/arith.rs).
NUMERIC = frozenset({"gt", "lt", "ge", "le", "equals"})


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"{str(value).lower()} is not a number: this compares numbers")
    return value


Number = Annotated[float | str, BeforeValidator(_not_bool)]


class Compare(Strict):
    """Comparisons of a JSON node: numbers (`gt`, `lt`, `ge`, `le`, `equals`), each with
    a number, a variable or arithmetic of them (`le = "${budget} * 1.1"`); its text
    (`ne`, `in` a list of values) or its length (`len`, of an array, object or string)."""

    gt: Number | None = None
    lt: Number | None = None
    ge: Number | None = None
    le: Number | None = None
    equals: Number | None = None
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
        given = self.given()
        if not given:
            raise ValueError(f"set one of {', '.join(COMPARISONS)}")
        for name, text in given:
            if name in NUMERIC:
                _compiles("arith", text, name)
        return self


def _expected(value: object) -> object:
    """A table of comparisons as a Compare, its first mistake named by its field: one
    error, rather than one for each type the value might have been."""
    if not isinstance(value, dict):
        return value
    try:
        return Compare.model_validate(value)
    except ValidationError as e:
        first = e.errors()[0]
        cause = first.get("ctx", {}).get("error")
        if isinstance(cause, FieldError):
            raise FieldError((*first["loc"], *cause.loc), str(cause)) from None
        raise FieldError(tuple(first["loc"]), first["msg"].removeprefix("Value error, ")) from None


Expected = Annotated[Scalar | Compare, BeforeValidator(_expected)]


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
    json_: dict[str, Expected] = Field(default_factory=dict, alias="json")
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
