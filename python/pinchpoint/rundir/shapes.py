"""The shapes of the run folder's JSON files, as written by the stages and read by the
later ones. Keys a stage may leave out (older runs, imported runs, killed runs) are
`NotRequired`; readers use `.get` for those."""

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import typing_extensions as te


class StepWindow(TypedDict):
    """One load level's window in unix seconds (run.json's `steps`)."""

    step: int
    users: int
    start: float
    end: float
    kind: NotRequired[str]  # "users" (closed loop) or "rate" (open loop)
    level: NotRequired[float]
    late: NotRequired[int]
    unsent: NotRequired[int]
    # The step an [sla] objective stopped: why (run.json `aborted`'s reason).
    aborted: NotRequired[str]
    # A step begun by a change of users or rate asked while the run went (load/control.py):
    # `by` (page or terminal) and `at` (unix seconds).
    manual: NotRequired[dict[str, Any]]


class HostFacts(TypedDict, total=False):
    hostname: str
    cpu_count: int
    platform: str
    python: str


class RunJson(TypedDict):
    """run.json: what the load stage did."""

    run_id: str
    started: float
    ended: float
    steps: list[StepWindow]
    interrupted: NotRequired[bool]
    warmup_s: NotRequired[float]
    records: NotRequired[int]
    records_error: NotRequired[str | None]
    engine: NotRequired[dict[str, Any]]
    host: NotRequired[HostFacts]
    log_marks: NotRequired[dict[str, Any]]
    load_steps: NotRequired[list[dict[str, Any]]]
    # The name of each `endpoint` index of requests.parquet: `METHOD path`, `flow/step`.
    endpoint_names: NotRequired[list[str]]
    # The kind of each: request, ws_session, ws_message, grpc_call, grpc_message.
    endpoint_kinds: NotRequired[list[str]]
    abandoned: NotRequired[int]
    # Why the load stopped before its end on its own: a hook or Locust process broke.
    stopped: NotRequired[str]
    # The [sla] objective that stopped the run (load/abort.py): objective, limit, value,
    # step, broken_s, reason.
    aborted: NotRequired[dict[str, Any]]
    error_reasons: NotRequired[dict[str, list[str]]]
    find_knee: NotRequired[dict[str, Any]]
    # Generators on Ray (load/distributed): per generator its node, share, requests, CPU
    # self-check, and `lost` with a `reason` when it was lost mid-run.
    generators: NotRequired[list[dict[str, Any]]]
    recovered: NotRequired[dict[str, list[str]]]
    # Imported runs: the tool and files they came from.
    source: NotRequired[dict[str, Any]]
    # "import" is a keyword: imported runs' own key, read with .get("import").


class FileCountsJson(TypedDict, total=False):
    lines: int
    matched: int
    other_run: int
    untagged: int
    unparseable: int
    unparseable_lines: list[Any]


class ComponentCounts(FileCountsJson, total=False):
    """One component's counts in collection.json, over all its files."""

    files: dict[str, FileCountsJson]
    warnings: list[str]
    agent: str  # the agent that collected it
    error: str  # why it was not collected


class CollectionJson(TypedDict):
    """collection.json: what collection read of each component's logs."""

    schema: str
    run_id: str
    components: dict[str, ComponentCounts]
    agents: NotRequired[dict[str, Any]]
    prometheus: NotRequired[dict[str, Any]]
    otlp: NotRequired[dict[str, Any]]
    # Calls between tiers that spans showed: caller -> callees.
    calls: NotRequired[dict[str, list[str]]]


# verdict.json's `steps[]`: what the client saw, each tier's times and each component's
# resources (docs/verdict.schema.json's `step`, `tier` and `resource`). A component's samples
# are read by key name (analyze/context.py `resource_of`), so they stay a map of numbers.
# A step is built once (analyze/steps.py) and only read after: its keys are ReadOnly and its
# maps Mappings, so the type checker refuses a write into one.
# A percentile (`p50`, `p95`, `p99.9`) of the answered requests, in ms; None: no answer.
LatencyJson = Mapping[str, float | None]
# A component's (or `host`'s, `generator`'s) samples over the step: `cpu_cores`,
# `cpu_wait_cores`, `processes`, `lock_waits`, `net_util`...
ResourceJson = Mapping[str, Any]

# One tier's times in a step; a key is missing where the tier's records do not give it.
TierJson = te.TypedDict(
    "TierJson",
    {
        "count": te.ReadOnly[int],
        "p50_ms": te.ReadOnly[float | None],
        "p90_ms": te.ReadOnly[float | None],
        "p95_ms": te.ReadOnly[float | None],
        "p99_ms": te.ReadOnly[float | None],
        "p99.9_ms": te.ReadOnly[float | None],
        "mean_ms": te.ReadOnly[float | None],
        "concurrency": te.ReadOnly[float | None],
        "self_p50_ms": te.ReadOnly[float | None],
        "self_p90_ms": te.ReadOnly[float | None],
        "self_p95_ms": te.ReadOnly[float | None],
        "self_p99_ms": te.ReadOnly[float | None],
        "self_p99.9_ms": te.ReadOnly[float | None],
        "self_by": te.ReadOnly[str],
        "queue_p50_ms": te.ReadOnly[float | None],
        "queue_p95_ms": te.ReadOnly[float | None],
        "queue_mean_ms": te.ReadOnly[float | None],
        "logged_queue_p50_ms": te.ReadOnly[float | None],
        "logged_queue_p95_ms": te.ReadOnly[float | None],
        "errors": te.ReadOnly[int],
        "rejected": te.ReadOnly[int],
    },
    total=False,
)


class StepJson(te.TypedDict):
    step: te.ReadOnly[int]
    users: te.ReadOnly[int]
    duration_s: te.ReadOnly[float]
    requests: te.ReadOnly[int]
    errors: te.ReadOnly[int]
    error_rate: te.ReadOnly[float]
    errors_by_class: te.ReadOnly[Mapping[str, int]]
    throughput_rps: te.ReadOnly[float]
    latency_ms: te.ReadOnly[LatencyJson]
    latency_mean_ms: te.ReadOnly[float | None]
    tiers: te.ReadOnly[Mapping[str, TierJson]]
    resources: te.ReadOnly[Mapping[str, ResourceJson]]
    kind: te.ReadOnly[NotRequired[str]]  # "users" (closed loop) or "rate" (open loop)
    level: te.ReadOnly[NotRequired[float | None]]  # the users, or the target rate
    late: te.ReadOnly[NotRequired[int]]
    unsent: te.ReadOnly[NotRequired[int]]
    bytes_per_s: te.ReadOnly[NotRequired[float]]
    error_latency_p50_ms: te.ReadOnly[NotRequired[float | None]]
    # Each component's utilisation of what it depends on (analyze/usage.py).
    usage: te.ReadOnly[NotRequired[Mapping[str, Mapping[str, float]]]]


class EndpointStepJson(TypedDict):
    """One named request's numbers in one step (verdict.json's `endpoints[].steps[]`)."""

    users: int
    level: float
    requests: int
    errors: int
    errors_by_class: dict[str, int]
    throughput_rps: float
    p50_ms: float
    concurrency: float
    # Each tier's count, median and own part for this request alone.
    tiers: NotRequired[dict[str, TierJson]]


class EndpointJson(TypedDict):
    """One named request of the plan on its own (verdict.json's `endpoints[]`)."""

    endpoint: str
    index: int
    steps: list[EndpointStepJson]
    min_latency_ms: float | None
    # Little's law at its peak: throughput × its minimal latency.
    workers: NotRequired[float]
    peak_throughput_rps: NotRequired[float]
    at_users: NotRequired[int]
    behaviour: str  # "synchronous", "asynchronous" or "undecided"
    ceiling: NotRequired[float | None]
    summary: str


class FindingJson(TypedDict):
    """One finding of verdict.json: a component, the resource that limits it, the evidence
    (the analysis builds it from an analyze.findings.Finding)."""

    component: str
    resource: str
    starts_at_users: int | None
    evidence: list[str]
    summary: str
    name: str
    confidence: float
    starts_at_rate: NotRequired[float]
    request: NotRequired[str]
    at_lowest_load: NotRequired[bool]
    database: NotRequired[dict[str, Any]]
    # A Redis component's inside (analyze/redis.py).
    redis: NotRequired[dict[str, Any]]


class VerdictJson(TypedDict):
    """verdict.json: the analysis."""

    schema: str
    run_id: str
    headline: str
    bottleneck: dict[str, Any] | None
    interrupted: NotRequired[bool]
    tiers: NotRequired[list[str]]  # component names, callers first
    calls: NotRequired[dict[str, Any]]
    pools: NotRequired[dict[str, dict[str, Any]]]
    steps: NotRequired[list[StepJson]]
    generator: NotRequired[dict[str, Any]]
    findings: NotRequired[list[FindingJson]]
    workers_estimate: NotRequired[list[dict[str, Any]]]
    knee: NotRequired[dict[str, Any] | None]
    scalability: NotRequired[dict[str, Any] | None]
    partial: NotRequired[bool]  # the run was killed and its folder rebuilt
    missing: NotRequired[list[str]]
    error_reasons: NotRequired[dict[str, list[str]]]
    endpoints: NotRequired[list[EndpointJson]]
    # The plan's [sla] as the analysis checked it (analyze/sla_record.py); null without
    # one, absent from a verdict written before it was kept.
    sla: NotRequired[dict[str, Any] | None]
    # The profiled step's top functions per Python tier (analyze/hot_code.py).
    profile: NotRequired[dict[str, Any]]
    # The latency grew, but no tier's own time explains it.
    unattributed: NotRequired[bool]
    # Why an [sla] objective stopped the run (run.json `aborted`'s reason).
    aborted: NotRequired[str]
    # The steps begun by a change of load while the run went: step, users or rate, by, at.
    load_changes: NotRequired[list[dict[str, Any]]]
    # Generators lost mid-run: the load they did not send (analyze/causes/generator.py).
    load_short: NotRequired[str]
