"""The plan the demo runs: the stepped probe load against the demo stack."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, NamedTuple


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def demo_plan(
    url: str,
    components: list[dict[str, Any]],
    lower: int,
    upper: int,
    step: int,
    duration_s: float,
    cpu_ms: float,
    wait_ms: float,
    find_knee: bool = False,
) -> str:
    """A plan file's text, written so a reader can copy it for a stack of their own;
    with `find_knee`, the users are searched for the knee rather than all stepped."""
    lines = [
        "# Written by `pinchpoint demo`: the same file runs with `pinchpoint run`.",
        "[target]",
        f"url = {_toml_value(url)}",
        "",
        "[load]",
        f"lower = {lower}",
        f"upper = {upper}",
        "find_knee = true" if find_knee else f"step = {step}",
        f"duration = {_toml_value(f'{duration_s:g}s')}",
        f"warmup = {_toml_value(f'{min(0.5, duration_s / 4):g}s')}",
        'timeout = "10s"',
        "",
        "[[request]]",
        f"path = {_toml_value(probe_path(cpu_ms, wait_ms))}",
    ]
    return "\n".join(lines + component_lines(components)) + "\n"


def probe_path(cpu_ms: float, wait_ms: float) -> str:
    """The probe's path for this much CPU and waiting per request."""
    return f"/sys_perf_check?cpu={cpu_ms:g}&wait={wait_ms:g}"


def component_lines(components: list[dict[str, Any]]) -> list[str]:
    """The `[[component]]` tables of a plan."""
    lines: list[str] = []
    for c in components:
        lines += ["", "[[component]]"]
        for key in ("name", "role", "calls", "workers"):
            if c.get(key) is not None:
                lines.append(f"{key} = {_toml_value(c[key])}")
        for table in ("log", "process", "database", "redis"):
            if c.get(table):
                lines.append(f"[component.{table}]")
                lines += [f"{k} = {_toml_value(v)}" for k, v in c[table].items() if v is not None]
    return lines


class FlowStep(NamedTuple):
    """A named request of a flow."""

    name: str
    path: str
    method: str = "GET"


def request_lines(path: str, method: str) -> list[str]:
    return ["[[request]]", f"path = {_toml_value(path)}", f"method = {_toml_value(method)}"]


def flow_lines(name: str, steps: Sequence[FlowStep]) -> list[str]:
    """A `[[flow]]` walking `steps` in turn, each a named request (`<name>/<step>`)."""
    lines = ["[[flow]]", f"name = {_toml_value(name)}"]
    for step in steps:
        lines += [
            "",
            "[[flow.step]]",
            f"name = {_toml_value(step.name)}",
            f"method = {_toml_value(step.method)}",
            f"path = {_toml_value(step.path)}",
        ]
    return lines


def otlp_lines(listen: str, settle_s: float) -> list[str]:
    """An `[[otlp]]` table: a receiver of spans on `listen`, kept `settle_s` past the load."""
    return [
        "",
        "[[otlp]]",
        f"listen = {_toml_value(listen)}",
        f"settle = {_toml_value(f'{settle_s:g}s')}",
    ]


def stack_plan(
    url: str,
    components: list[dict[str, Any]],
    users: tuple[int, int, int],
    duration_s: float,
    path: str,
    method: str = "GET",
    sampling_s: float = 1.0,
    think_time_s: float = 0.0,
    flow: tuple[str, Sequence[FlowStep]] | None = None,
    otlp: tuple[str, float] | None = None,
) -> str:
    """A plan stepping `users` (lower, upper, step) on one request of a stack's components,
    or on a flow (its name and steps) instead when given; with `otlp` (an address and a
    settle time), receiving the stack's spans there."""
    lower, upper, step = users
    lines = [
        "[target]",
        f"url = {_toml_value(url)}",
        "",
        "[load]",
        f"lower = {lower}",
        f"upper = {upper}",
        f"step = {step}",
        f"duration = {_toml_value(f'{duration_s:g}s')}",
        f"warmup = {_toml_value(f'{min(0.5, duration_s / 4):g}s')}",
        'timeout = "10s"',
        f"think_time = {_toml_value(f'{think_time_s * 1000:g}ms')}",
        "",
        "[sampling]",
        f"interval = {_toml_value(f'{sampling_s:g}s')}",
        "",
        *(flow_lines(*flow) if flow is not None else request_lines(path, method)),
    ]
    spans = otlp_lines(*otlp) if otlp is not None else []
    return "\n".join(lines + component_lines(components) + spans) + "\n"


_TARGET_URL = re.compile(r"(?ms)^(\[target\][^\[]*?^\s*url\s*=\s*)(\"[^\"\n]*\"|'[^'\n]*')")


def plan_on_stack(text: str, url: str, components: list[dict[str, Any]], source: str) -> str:
    """A plan's text pointed at the demo stack: its `[target] url` replaced by the stack's
    and the stack's components added. ValueError if the plan has no such url or its own
    components."""
    if re.search(r"(?m)^\s*\[\[\s*component\s*\]\]", text):
        raise ValueError(
            f"{source}: the demo stack brings its own [[component]]s; remove the plan's"
        )
    pointed, n = _TARGET_URL.subn(lambda m: m.group(1) + _toml_value(url), text, count=1)
    if n != 1:
        raise ValueError(f'{source}: no url = "..." under [target] to point at the demo stack')
    return pointed.rstrip("\n") + "\n" + "\n".join(component_lines(components)) + "\n"
