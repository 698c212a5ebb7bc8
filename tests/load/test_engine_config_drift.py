"""The engine's configuration is defined once, by the Rust types that read it
(crates/pinchpoint-engine/src/config); the `TypedDict`s Python builds it with
(load/engine_config.py) must name the same keys in every record, and the same ones as
possibly None. A config that is wrong is refused with the key it is wrong at."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from pinchpoint import _engine
from pinchpoint.load.engine_config import EngineConfig, engine_config
from pinchpoint.plan.model import parse_plan

Records = dict[str, dict[str, bool]]

PLAN = """\
[target]
url = "http://127.0.0.1:9"

[[request]]
path = "/"

[load]
users = 1
duration = "1s"
"""


def typed_records(typed: Any, path: str = "") -> Records:
    """Each TypedDict's keys by path from `typed` (as `_engine.config_records` gives
    the engine's), each True if its type admits None."""
    hints = get_type_hints(typed)
    records = {path: {key: type(None) in get_args(hint) for key, hint in hints.items()}}
    for key, hint in hints.items():
        inner, where = _record_in(hint, f"{path}.{key}" if path else key)
        if inner is not None:
            records.update(typed_records(inner, where))
    return records


def _record_in(hint: Any, path: str) -> tuple[Any, str]:
    """The TypedDict a key's type holds (alone, in a list, or or None) and its path."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        held = [a for a in get_args(hint) if a is not type(None)]
        if len(held) != 1:
            return None, path
        hint = held[0]
    if get_origin(hint) is list:
        return _record_in(get_args(hint)[0], path + "[]")
    return (hint, path) if is_typeddict(hint) else (None, path)


def drift(python: Records, engine: Records) -> list[str]:
    """Every difference between the two, said in words."""
    out = []
    for path in sorted(python.keys() | engine.keys()):
        where = path or "EngineConfig"
        if path not in engine:
            out.append(f"{where}: a record in Python only")
            continue
        if path not in python:
            out.append(f"{where}: a record in the engine only")
            continue
        ours, theirs = python[path], engine[path]
        for key in sorted(ours.keys() - theirs.keys()):
            out.append(f"{where}: key {key!r} in Python only")
        for key in sorted(theirs.keys() - ours.keys()):
            out.append(f"{where}: key {key!r} in the engine only")
        for key in sorted(k for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]):
            side = "Python" if ours[key] else "the engine"
            out.append(f"{where}: key {key!r} may be None in {side} only")
    return out


def test_the_typed_dicts_match_the_engines_configuration() -> None:
    found = drift(typed_records(EngineConfig), _engine.config_records())
    assert not found, "EngineConfig and the engine's RunConfig differ:\n" + "\n".join(found)


def test_a_key_on_one_side_only_is_drift() -> None:
    engine = _engine.config_records()
    assert len(engine) > 10 and "flows[].steps[].request" in engine
    python = {path: dict(keys) for path, keys in engine.items()}
    python["requests[]"]["retries"] = False
    del engine["flows[].feed"]["random"]
    engine["open.phases[]"]["count"] = True
    assert drift(python, engine) == [
        "flows[].feed: key 'random' in Python only",
        "open.phases[]: key 'count' may be None in the engine only",
        "requests[]: key 'retries' in Python only",
    ]


def _config(tmp_path: Path) -> dict[str, Any]:
    config = engine_config(parse_plan(PLAN, "plan.toml"), "r1", tmp_path / "records")
    return dict(config)


def test_a_wrong_key_or_type_is_refused_naming_it(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with pytest.raises(ValueError, match="engine config: extra: unknown field `extra`"):
        _engine.start({**config, "extra": 1})
    steps = [{**config["steps"][0], "users": "ten"}]
    with pytest.raises(
        ValueError, match=r'steps\[0\]\.users: invalid type: string "ten", expected u32'
    ):
        _engine.start({**config, "steps": steps})
    with pytest.raises(ValueError, match=r"config: missing field `seed`"):
        _engine.start({k: v for k, v in config.items() if k != "seed"})
    think = {**config["think"], "kind": "gamma"}
    with pytest.raises(ValueError, match=r"think.kind: unknown variant `gamma`"):
        _engine.start({**config, "think": think})
    with pytest.raises(ValueError, match=r"timeout_s: -1 is not a duration in seconds"):
        _engine.start({**config, "timeout_s": -1.0})
    with pytest.raises(TypeError, match=r"requests\[0\]\.headers: type object is not data"):
        _engine.start({**config, "requests": [{**config["requests"][0], "headers": object()}]})
