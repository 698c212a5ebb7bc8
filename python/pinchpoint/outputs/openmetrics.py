"""`--metrics HOST:PORT`: the run's live counters on `/metrics`, in the Prometheus text
exposition format (0.0.4), for a Prometheus to scrape while the run goes.

Fed by the tick of each second: requests and errors (by class) as counters, the latency
of answered requests as a classic histogram per step (its buckets counted from the
second's HdrHistogram), the records and failures of each kind (`kind`: request,
ws_session, ws_message, grpc_call, grpc_message), the step, its users and level, and this
process's CPU. Every series is labelled by run id; the labels are few (steps and error
classes are bounded, the kinds five)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pinchpoint.load.hdr import Histogram, decode_v2, index_for
from pinchpoint.outputs.bounded_server import BoundedHandler, Limits, start_server, stop_server

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Upper bounds of the classic buckets, in µs (1 ms .. 10 s); +Inf is added.
BOUNDS_US = (
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
)
# An HDR count at index i falls in the first classic bucket whose bound's index is >= i:
# a bound splits an HDR sub-bucket at most, within the histogram's 3 digits.
_CUTS = index_for(np.array(BOUNDS_US, dtype=np.int64))
MAX_STEPS = 256
MAX_CLASSES = 32
OTHER_CLASS = "other"
# Named requests past this many are summed under `other` (a label each, kept bounded).
MAX_REQUESTS = 64
# A scrape is short and Prometheus makes one at a time: a few threads answer them, and
# clients that connect and stall hold none (pinchpoint.outputs.bounded_server).
LIMITS = Limits(max_connections=64, workers=4)
CPU_EVERY_S = 0.5


@dataclass
class StepLatency:
    """The latencies of one step's answered requests, bucketed as Prometheus reads them."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(BOUNDS_US))
    count: int = 0
    sum_s: float = 0.0

    def add(self, counts: np.ndarray) -> None:
        total = int(counts.sum())
        if not total:
            return
        below = np.cumsum(counts)[_CUTS]
        self.buckets = [a + int(b) for a, b in zip(self.buckets, below, strict=True)]
        self.count += total
        self.sum_s += Histogram(counts, total, 0, 0).mean() * total / 1e6


@dataclass
class State:
    """What the last tick said, and the latencies summed over every tick."""

    requests: int = 0
    errors: int = 0
    # Failed requests by class: one `any` when the snapshot does not give classes.
    classes: dict[str, int] = field(default_factory=dict)
    step: int = 0
    users: int = 0
    kind: str = "users"
    level: float = 0.0
    cpu_cores: float | None = None
    # Requests in flight at the tick, and the longest send lag of its second (open loop).
    in_flight: int | None = None
    send_lag_s: float | None = None
    steps: dict[int, StepLatency] = field(default_factory=dict)
    # Requests and errors so far of each step, by the step they were sent in.
    step_counts: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Per named request of the plan: its counts so far and its latencies over the run.
    named: dict[str, NamedRequest] = field(default_factory=dict)
    # Records and failed records so far of each kind (request, ws_session, ws_message,
    # grpc_call, grpc_message): the engine's, absent from a Locust run's snapshots.
    kinds: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class NamedRequest:
    requests: int = 0
    errors: int = 0
    latency: StepLatency = field(default_factory=StepLatency)


class Tally:
    """The run's metrics so far, fed each second by `__call__` with the engine's snapshot."""

    def __init__(
        self,
        run_id: str,
        cpu_clock: Callable[[], float] = time.process_time,
        requests: list[str] | None = None,
    ) -> None:
        self.run_id = run_id
        # The names of the plan's requests, by the engine's `endpoint` index.
        self.names = list(requests or [])
        self.cpu_clock = cpu_clock
        self.state = State()
        self.lock = threading.Lock()
        # The CPU clock when last read, so that the first tick has a second to measure.
        self._cpu_at = (time.monotonic(), cpu_clock())

    def __call__(self, snapshot: dict[str, Any]) -> None:
        self.update(snapshot, time.monotonic(), self.cpu_clock())

    def update(self, snapshot: dict[str, Any], now: float, cpu_s: float) -> None:
        counts = _window_counts(snapshot)
        with self.lock:
            s = self.state
            step = int(snapshot.get("step", 0))
            sent = int(snapshot.get("requests", 0)) - s.requests
            failed = int(snapshot.get("errors", 0)) - s.errors
            if step in s.step_counts or len(s.step_counts) < MAX_STEPS:
                requests, errors = s.step_counts.get(step, (0, 0))
                s.step_counts[step] = (requests + sent, errors + failed)
            s.requests = int(snapshot.get("requests", 0))
            s.errors = int(snapshot.get("errors", 0))
            classes = snapshot.get("errors_by_class")
            if classes is None:
                classes = {"any": int(snapshot.get("errors", 0))}
            s.classes = _bounded_classes(classes)
            for name, of_kind in (snapshot.get("by_kind") or {}).items():
                s.kinds[str(name)] = (int(of_kind["requests"]), int(of_kind["errors"]))
            s.step = int(snapshot.get("step", 0))
            s.users = int(snapshot.get("users", 0))
            s.kind = str(snapshot.get("kind", "users"))
            s.level = float(snapshot.get("level", 0.0))
            if "in_flight" in snapshot:
                s.in_flight = int(snapshot["in_flight"])
            if "send_lag_max_us" in snapshot:
                s.send_lag_s = int(snapshot["send_lag_max_us"]) / 1e6
            # The parts of one second come together: the CPU is read over the second.
            if now - self._cpu_at[0] >= CPU_EVERY_S:
                s.cpu_cores = (cpu_s - self._cpu_at[1]) / (now - self._cpu_at[0])
            self._cpu_at = (now, cpu_s)
            if counts is not None:
                if s.step not in s.steps and len(s.steps) >= MAX_STEPS:
                    del s.steps[min(s.steps)]
                s.steps.setdefault(s.step, StepLatency()).add(counts)
            self._named(snapshot.get("endpoints") or [])

    def _named(self, endpoints: list[dict[str, Any]]) -> None:
        """Each named request's counts (so far, summed under `other` past MAX_REQUESTS)
        and its window's latencies added to its histogram."""
        totals: dict[str, tuple[int, int]] = {}
        for at, endpoint in enumerate(endpoints):
            name = self._name(at)
            requests, errors = totals.get(name, (0, 0))
            totals[name] = (requests + int(endpoint["requests"]), errors + int(endpoint["errors"]))
            named = self.state.named.setdefault(name, NamedRequest())
            if data := endpoint.get("window_hdr_v2"):
                named.latency.add(decode_v2(bytes(data)))
        for name, (requests, errors) in totals.items():
            self.state.named[name].requests = requests
            self.state.named[name].errors = errors

    def _name(self, at: int) -> str:
        if at >= MAX_REQUESTS - 1:
            return OTHER_CLASS
        return self.names[at] if at < len(self.names) else f"request {at}"

    def families(self) -> list[Family]:
        with self.lock:
            return families(self.state, self.run_id)


class MetricsServer(Tally):
    """An HTTP server in a daemon thread answering GET /metrics with the tally's text."""

    def __init__(
        self,
        host: str,
        port: int,
        run_id: str,
        cpu_clock: Callable[[], float] = time.process_time,
        requests: list[str] | None = None,
        limits: Limits = LIMITS,
    ) -> None:
        super().__init__(run_id, cpu_clock, requests)
        self.httpd, self.thread = start_server(host, port, _handler(self), limits)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def render(self) -> str:
        with self.lock:
            return exposition(self.state, self.run_id)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        stop_server(self.httpd, self.thread)


def _window_counts(snapshot: dict[str, Any]) -> np.ndarray | None:
    data = snapshot.get("window_hdr_v2")
    return decode_v2(bytes(data)) if data else None


def _bounded_classes(classes: dict[str, int]) -> dict[str, int]:
    """At most MAX_CLASSES classes, the rest summed under `other`."""
    names = sorted(classes)
    out = {name: int(classes[name]) for name in names[: MAX_CLASSES - 1]}
    rest = names[MAX_CLASSES - 1 :]
    if rest:
        out[OTHER_CLASS] = out.get(OTHER_CLASS, 0) + sum(int(classes[n]) for n in rest)
    return out


@dataclass
class Family:
    """One metric: its name, type, help and samples, each (name, labels, value); a
    histogram's samples are its `_bucket`, `_sum` and `_count`."""

    name: str
    kind: str
    about: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def families(state: State, run_id: str) -> list[Family]:
    """Every metric of `state`, labelled by run id, in the order the exposition gives."""
    run = {"run_id": run_id}
    out: list[Family] = []

    def metric(name: str, kind: str, about: str) -> Family:
        out.append(Family(name, kind, about))
        return out[-1]

    def one(family: Family, value: float, **labels: str) -> None:
        family.samples.append((family.name, {**run, **labels}, value))

    one(metric("pinchpoint_requests_total", "counter", "Requests ended so far."), state.requests)
    errors = metric("pinchpoint_errors_total", "counter", "Failed requests so far, by class.")
    for name, n in state.classes.items():
        one(errors, n, **{"class": name})
    latency = metric(
        "pinchpoint_latency_seconds",
        "histogram",
        "Latency of answered requests, by the step they were sent in.",
    )
    for step, each in sorted(state.steps.items()):
        _histogram(latency, each, {**run, "step": str(step)})
    by_step = metric(
        "pinchpoint_step_requests_total", "counter", "Requests ended so far, by step sent in."
    )
    for step, (n, _) in sorted(state.step_counts.items()):
        one(by_step, n, step=str(step))
    by_step = metric(
        "pinchpoint_step_errors_total", "counter", "Failed requests so far, by step sent in."
    )
    for step, (_, n) in sorted(state.step_counts.items()):
        one(by_step, n, step=str(step))
    by_kind = metric("pinchpoint_kind_requests_total", "counter", "Records ended so far, by kind.")
    for kind, (n, _) in sorted(state.kinds.items()):
        one(by_kind, n, kind=kind)
    by_kind = metric("pinchpoint_kind_errors_total", "counter", "Failed records so far, by kind.")
    for kind, (_, n) in sorted(state.kinds.items()):
        one(by_kind, n, kind=kind)
    _named_metrics(state, run, metric)
    one(metric("pinchpoint_users", "gauge", "Users of the current step."), state.users)
    level = metric(
        "pinchpoint_load_level", "gauge", "The current step's level: users, or requests/s."
    )
    one(level, state.level, kind=state.kind)
    one(metric("pinchpoint_step", "gauge", "The current step, from 0."), state.step)
    in_flight = metric("pinchpoint_in_flight", "gauge", "Requests sent and not yet answered.")
    if state.in_flight is not None:
        one(in_flight, state.in_flight)
    lag = metric(
        "pinchpoint_send_lag_seconds",
        "gauge",
        "The longest a request of the last second was sent after its intended time.",
    )
    if state.send_lag_s is not None:
        one(lag, state.send_lag_s)
    cpu = metric(
        "pinchpoint_generator_cpu_cores", "gauge", "CPU of the generator over the last second."
    )
    if state.cpu_cores is not None:
        one(cpu, state.cpu_cores)
    return out


def _histogram(family: Family, latency: StepLatency, labels: dict[str, str]) -> None:
    """The classic buckets, sum and count of `latency` under `labels`."""
    bucket = f"{family.name}_bucket"
    for bound, n in zip(BOUNDS_US, latency.buckets, strict=True):
        family.samples.append((bucket, {**labels, "le": f"{bound / 1e6:g}"}, n))
    family.samples.append((bucket, {**labels, "le": "+Inf"}, latency.count))
    family.samples.append((f"{family.name}_sum", labels, latency.sum_s))
    family.samples.append((f"{family.name}_count", labels, latency.count))


def _named_metrics(
    state: State, run: dict[str, str], metric: Callable[[str, str, str], Family]
) -> None:
    """The counts and latencies of each named request of the plan."""
    named = sorted(state.named.items())
    requests = metric(
        "pinchpoint_named_requests_total", "counter", "Requests ended so far, by request."
    )
    for name, one in named:
        requests.samples.append((requests.name, {**run, "request": name}, one.requests))
    errors = metric(
        "pinchpoint_named_errors_total", "counter", "Failed requests so far, by request."
    )
    for name, one in named:
        errors.samples.append((errors.name, {**run, "request": name}, one.errors))
    latency = metric(
        "pinchpoint_named_latency_seconds",
        "histogram",
        "Latency of answered requests over the run, by request.",
    )
    for name, one in named:
        _histogram(latency, one.latency, {**run, "request": name})


def exposition(state: State, run_id: str) -> str:
    """The text format of `state`: HELP and TYPE then the samples of each metric."""
    lines: list[str] = []
    for family in families(state, run_id):
        lines.append(f"# HELP {family.name} {family.about}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for name, labels, value in family.samples:
            said = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{said}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    """A count as an integer, a measure in full (repr)."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _handler(server: MetricsServer) -> type[BoundedHandler]:
    class Handler(BoundedHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404)
                return
            body = server.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
