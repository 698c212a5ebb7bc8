"""A plan as the Rust engine's run configuration.

The engine's types define the configuration's keys (crates/pinchpoint-engine/src/config:
`RunConfig` and the types under it, read from this dict as data). The `TypedDict`s here
type the same keys for mypy; tests/load/test_engine_config_drift.py fails when their keys,
or which of them may be None, differ from the engine's. A key unknown, missing or of the
wrong type is a `ValueError` at `_engine.start` that names it (`steps[1].users: ...`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypedDict

from pinchpoint.load.hook_box import HookBox, HookError
from pinchpoint.plan.flows import Feed, Flow, FlowStep
from pinchpoint.plan.grpc import data_text
from pinchpoint.plan.load_models import ThinkTime
from pinchpoint.plan.model import Level, Plan, PlanError, Request, Target
from pinchpoint.plan.websocket import Message, message_names


class EngineMessage(TypedDict):
    # As the run's tables name it (`chat/room/hello`).
    name: str
    send: str | None
    binary: bool
    receive: bool
    captures: list[tuple[str, str, str, str]]
    checks: list[tuple[str, str, str]]


class EngineGrpc(TypedDict):
    # `package.Service/Method`, declared in `proto` (its imports found in `import_paths`,
    # then in its own folder).
    method: str
    proto: str
    import_paths: list[str]


class EngineRequest(TypedDict):
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    weight: int
    timeout_s: float | None
    # A WebSocket upgrade: the connection then carries the messages.
    ws: bool
    messages: list[EngineMessage]
    # A gRPC call: the path is the method's, the body its request message as JSON.
    grpc: EngineGrpc | None


class EngineStep(TypedDict):
    users: int
    duration_s: float
    ramp_from: int | None


class EngineThink(TypedDict):
    kind: Literal["constant", "uniform", "exponential"]
    value_s: float
    min_s: float
    max_s: float


class EnginePhase(TypedDict):
    kind: Literal["rate", "pause", "count"]
    duration_s: float
    rate: float
    ramp_to: float | None
    count: int


class EngineOpen(TypedDict):
    phases: list[EnginePhase]
    arrivals: str
    max_in_flight: int


class EngineProtocol(TypedDict):
    http: str
    tls: bool
    ca_file: str | None
    insecure: bool
    streams_per_connection: int


class EngineFeed(TypedDict):
    columns: list[str]
    rows: list[list[str]]
    per_user: bool
    random: bool


class EngineFlowStep(TypedDict):
    # As the run's tables name it (`shop/login`); the engine's reasons begin with it.
    name: str
    request: EngineRequest
    think: EngineThink | None
    # (variable, kind, text, pick): kind json, regex, header or cookie; pick first, random
    # or all.
    captures: list[tuple[str, str, str, str]]
    # (kind, text, expected): kind status, contains, matches, json, json_<gt|lt|ge|le|ne|
    # in|len>, header or max_ms.
    checks: list[tuple[str, str, str]]
    hook: bool
    # continue, restart or stop_user.
    on_fail: str
    # A list variable (a capture with pick all): the step is sent once per value.
    foreach: str | None


class EngineFlow(TypedDict):
    name: str
    weight: int
    steps: list[EngineFlowStep]
    feed: EngineFeed | None


class EngineConfig(TypedDict):
    run_id: str
    host: str
    port: int
    requests: list[EngineRequest]
    steps: list[EngineStep]
    think: EngineThink
    open: EngineOpen | None
    seed: int
    timeout_s: float
    # None: the engine writes no records (nobody keeps them).
    records_path: str | None
    threads: int
    tag: bool
    protocol: EngineProtocol
    flows: list[EngineFlow]
    # A function `hook(request, vars)` (load/hooks.py), or None.
    hook: Callable[[dict, dict], dict | None] | None
    # Generators sharing a run (load/distributed): where this one's request ids start,
    # when (unix µs) they all start, and the run's level of each step to tag requests with.
    req_id_base: int
    start_at_us: int | None
    tag_levels: list[float]


def engine_config(plan: Plan, run_id: str, records_path: Path | None) -> EngineConfig:
    """The engine's configuration of `plan`. Reads the flows' feeds and starts the hook
    in its box (load/hook_box.py, closed by the caller): a ValueError names the feed's
    file and line, or the hook."""
    base = plan.target.base_path
    load = plan.load
    levels = load.levels()
    names = [r.label() for r in plan.request]
    requests = [_request(r, base, name) for r, name in zip(plan.request, names, strict=True)]
    flows = [_flow(f, i, base) for i, f in enumerate(plan.flow)]
    # In closed loop a WebSocket's messages are a user's, as a gRPC call's connection is:
    # such a request goes as a flow of one step.
    if flows or (
        not load.open and any(r.ws is not None or r.grpc is not None for r in plan.request)
    ):
        # A request beside flows is a flow of one step, named as the request.
        flows = [_single(r, name) for r, name in zip(requests, names, strict=True)] + flows
        requests = []
    return {
        "run_id": run_id,
        "host": plan.target.host,
        "port": plan.target.port,
        "requests": requests,
        "steps": []
        if load.open
        else [
            {"users": lv.users, "duration_s": lv.duration, "ramp_from": lv.ramp_from}
            for lv in levels
        ],
        "think": _think(load.think_time),
        "open": {
            "phases": [_phase(lv) for lv in levels],
            "arrivals": load.arrivals,
            "max_in_flight": load.max_in_flight,
        }
        if load.open
        else None,
        "seed": load.seed,
        "timeout_s": load.timeout,
        "records_path": None if records_path is None else str(records_path),
        "threads": load.threads,
        "tag": plan.target.tag,
        "protocol": _protocol(plan.target),
        "flows": flows,
        "hook": _hook(load.hook, load.timeout) if load.hook is not None else None,
        "req_id_base": 0,
        "start_at_us": None,
        "tag_levels": [],
    }


def _request(r: Request | FlowStep, base: str, label: str, weight: int = 1) -> EngineRequest:
    call = _grpc(r)
    return {
        "method": "POST" if call is not None else r.method,
        # A gRPC path names the method: the target URL's path does not prefix it.
        "path": r.target() if call is not None else base + r.target(),
        "headers": list(r.headers.items()),
        "body": data_text(r.data).encode() if call is not None else r.body.encode(),
        "weight": r.weight if isinstance(r, Request) else weight,
        "timeout_s": r.timeout,
        "ws": r.ws is not None,
        "messages": [
            _message(m, n) for m, n in zip(r.message, message_names(label, r.message), strict=True)
        ],
        "grpc": call,
    }


def _grpc(r: Request | FlowStep) -> EngineGrpc | None:
    if r.grpc is None or r.proto is None:
        return None
    return {"method": r.grpc, "proto": r.proto, "import_paths": list(r.import_paths)}


def _single(request: EngineRequest, name: str) -> EngineFlow:
    step: EngineFlowStep = {
        "name": name,
        "request": request,
        "think": None,
        "captures": [],
        "checks": [],
        "hook": False,
        "on_fail": "continue",
        "foreach": None,
    }
    return {"name": name, "weight": request["weight"], "steps": [step], "feed": None}


def _hook(spec: str, budget_s: float) -> HookBox:
    """The hook in its own process, each call within the plan's timeout."""
    try:
        return HookBox(spec, budget_s)
    except HookError as e:
        raise PlanError(f"load.hook: {e}") from None


def _flow(flow: Flow, index: int, base: str) -> EngineFlow:
    return {
        "name": flow.name,
        "weight": flow.weight,
        "steps": [
            {
                "name": label,
                "request": _request(s, base, label),
                "think": _think(s.think_time) if s.think_time is not None else None,
                "captures": [(c.name, *c.source(), c.pick) for c in s.capture],
                "checks": s.check.engine_checks() if s.check is not None else [],
                "hook": s.hook,
                "on_fail": s.on_fail,
                "foreach": s.foreach,
            }
            for s, label in zip(flow.step, flow.labels(), strict=True)
        ],
        "feed": _feed(flow.feed, index) if flow.feed is not None else None,
    }


def _message(m: Message, name: str) -> EngineMessage:
    return {
        "name": name,
        "send": m.send,
        "binary": m.binary,
        "receive": m.receive,
        "captures": [(c.name, *c.source(), c.pick) for c in m.capture],
        "checks": m.check.engine_checks() if m.check is not None else [],
    }


def _feed(feed: Feed, index: int) -> EngineFeed:
    try:
        data = feed.read()
    except ValueError as e:
        raise PlanError(f"flow[{index}].feed.file: {e}") from None
    return {
        "columns": data.columns,
        "rows": data.rows,
        "per_user": feed.per == "user",
        "random": feed.order == "random",
    }


def _think(think: ThinkTime) -> EngineThink:
    if think.uniform is not None:
        low, high = think.uniform
        return {"kind": "uniform", "value_s": 0.0, "min_s": low, "max_s": high}
    if think.exponential is not None:
        return {"kind": "exponential", "value_s": think.exponential, "min_s": 0.0, "max_s": 0.0}
    return {"kind": "constant", "value_s": think.constant or 0.0, "min_s": 0.0, "max_s": 0.0}


def _phase(level: Level) -> EnginePhase:
    phase = level.phase
    assert phase is not None
    if phase.pause is not None:
        kind: Literal["rate", "pause", "count"] = "pause"
    elif phase.arrival_count is not None:
        kind = "count"
    else:
        kind = "rate"
    return {
        "kind": kind,
        "duration_s": level.duration,
        "rate": (phase.arrival_rate or 0.0) if kind == "rate" else 0.0,
        "ramp_to": phase.ramp_to if kind == "rate" else None,
        "count": (phase.arrival_count or 0) if kind == "count" else 0,
    }


def _protocol(target: Target) -> EngineProtocol:
    """How the engine reaches the target."""
    return {
        "http": target.http,
        "tls": target.tls,
        "ca_file": target.ca_file,
        "insecure": target.insecure,
        "streams_per_connection": target.streams_per_connection or 0,
    }
