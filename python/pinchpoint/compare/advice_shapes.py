"""The parts of verdict.json that `run --check-advice` reads, checked before they are used:
the earlier run's prediction whole, as docs/verdict.schema.json's `prediction` describes it
(tests/compare/test_advice_shapes.py holds the two together), and the new run's steps and
pools as far as the check reads them. A key missing or unknown, a value of the wrong type,
a number below its least or not finite is a ValueError naming the field."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal, NotRequired, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config

# pydantic reads typing_extensions' TypedDict on Python 3.11, not typing's.
from typing_extensions import TypedDict

# Finite (allow_inf_nan): JSON's 1e400 reads as infinity, which no count or format takes.
_STRICT = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")
_READ = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_TEXT = re.compile(r"[\w .:/@+-]*")

Count = Annotated[int, Field(ge=0)]
Amount = Annotated[float, Field(ge=0)]

Setting = Literal["workers", "processes", "connections", "cpu_quota_cores"]
LimitedBy = Literal[
    "workers", "processes", "connections", "cpu_quota", "process_cpu", "cpu", "load"
]


@with_config(_STRICT)
class Prediction(TypedDict):
    """A verdict's `bottleneck.prediction`: the effect of the change its advice names."""

    component: str
    setting: Setting
    now: Amount
    to: Amount
    measured_rps: Amount
    predicted_rps: Amount
    at_users: Count
    limited_by: LimitedBy
    ceilings_rps: dict[str, float | None]
    line: str


@with_config(_READ)
class Bottleneck(TypedDict):
    component: str
    resource: str
    prediction: NotRequired[Prediction]


@with_config(_READ)
class EarlierVerdict(TypedDict):
    """What --check-advice reads of the earlier run's verdict."""

    bottleneck: NotRequired[Bottleneck | None]


@with_config(_READ)
class Pool(TypedDict):
    slots: Annotated[int, Field(ge=1)]
    most: NotRequired[Annotated[int, Field(ge=1)]]


@with_config(_READ)
class Resource(TypedDict, total=False):
    processes: Count | None
    cpu_quota_cores: Amount | None


@with_config(_READ)
class Step(TypedDict):
    users: Count
    throughput_rps: NotRequired[Amount | None]
    resources: NotRequired[dict[str, Resource]]


@with_config(_READ)
class LaterVerdict(TypedDict, total=False):
    """What --check-advice reads of the run made after the advice."""

    steps: list[Step] | None
    pools: dict[str, Pool] | None


T = TypeVar("T")

_EARLIER: TypeAdapter[EarlierVerdict] = TypeAdapter(EarlierVerdict)
_LATER: TypeAdapter[LaterVerdict] = TypeAdapter(LaterVerdict)
_PREDICTION: TypeAdapter[Prediction] = TypeAdapter(Prediction)


def earlier_verdict(verdict: dict[str, Any]) -> EarlierVerdict:
    return _checked(_EARLIER, verdict)


def later_verdict(verdict: dict[str, Any]) -> LaterVerdict:
    return _checked(_LATER, verdict)


def prediction(value: object) -> Prediction:
    return _checked(_PREDICTION, value)


def _checked(adapter: TypeAdapter[T], value: object) -> T:
    try:
        return adapter.validate_python(value)
    except ValidationError as e:
        raise ValueError(_first_error(e)) from None


def _first_error(error: ValidationError) -> str:
    """The first problem pydantic found, as `field.path: what is wrong (the value)`."""
    first = error.errors(include_url=False, include_context=False)[0]
    field = "".join(_step(part) for part in first["loc"]).removeprefix(".") or "the whole file"
    shown = _short(first["input"]) if first["type"] != "missing" else ""
    return f"{field}: {first['msg'].lower()}" + (f" (found {shown})" if shown else "")


def _step(part: int | str) -> str:
    """One step of a field's path: `.key`, or `[0]` and `["a key"]` (quoted as JSON, its
    control characters escaped) when the key is not a plain name."""
    if isinstance(part, int):
        return f"[{part}]"
    return f".{part}" if _PLAIN_KEY.fullmatch(part) else f"[{json.dumps(part)}]"


def shown(text: str) -> str:
    """A text of the file, as it reads in an error: quoted as JSON when it is not plain."""
    return text if _PLAIN_TEXT.fullmatch(text) else json.dumps(text)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
