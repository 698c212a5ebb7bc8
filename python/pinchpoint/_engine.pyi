"""Types of `pinchpoint._engine`, the compiled extension (crates/pinchpoint-py)."""

import os
from typing import Any, Self, final

from pinchpoint.load.engine_config import EngineConfig, EngineFlow

__all__ = [
    "ERROR_CLASSES",
    "KINDS",
    "LoadRun",
    "NginxScanner",
    "config_records",
    "expression_error",
    "flows_error",
    "grpc_method",
    "records_to_parquet",
    "remote_write_body",
    "remote_write_read",
    "start",
]

# The engine's error classes (connect_refused, ..., timeout, io, check, capture, then
# grpc_<status> and grpc_protocol), in its order.
ERROR_CLASSES: list[str]
# The kinds of records, in order: request, ws_session, ws_message, grpc_call, grpc_message.
KINDS: list[str]

@final
class LoadRun:
    """A load run going on in the background."""

    def stop(self) -> None:
        """Asks the run to stop after the requests in flight; `wait` then returns it."""

    def abandon(self) -> None:
        """Stops the run and drops the requests in flight at once."""

    def set_users(self, id: int, users: int) -> None:
        """From the driver's next look, `users` users in a step of their own until the
        planned end or the next change (`changes` of the summary, by `id`); ValueError
        for an open-loop run or a generator's share."""

    def set_rate(self, id: int, rate: float) -> None:
        """Open loop: from the scheduler's next look, `rate` arrivals per second in a
        phase of their own until the planned end or the next change; ValueError for a
        closed-loop run, a generator's share or a rate not above 0."""

    def snapshot(self) -> dict[str, Any]:
        """Live counters: requests, errors, step, users, kind, level, late, window_*, and
        `by_step`: each step with requests ended since the previous snapshot, counted by
        the step they were sent in (requests, errors, errors_by_class, users,
        first_start_us, window_*)."""

    def wait(self, timeout_s: float) -> dict[str, Any] | None:
        """The run's summary once it has ended, None while it goes on after `timeout_s`."""

@final
class NginxScanner:
    """The records of one run in one nginx access log, from a byte offset on."""

    def __new__(
        cls,
        path: str | os.PathLike[str],
        offset: int,
        log_format: str,
        run_id: str,
        max_line: int,
        compensated_sum: bool,
    ) -> Self: ...
    def next_batch(self, max_lines: int) -> dict[str, Any]:
        """Up to `max_lines` lines: `rows`, the columns as bytes, the counts, `deferred`
        (bytes or None) and `done`."""
    def next_tiers(self, max_lines: int, component: str) -> dict[str, Any]:
        """As `next_batch`, the records as `tiers`: a TiersBatch of component `component`
        (None when none matched) instead of the columns as bytes."""

class TiersBatch:
    """Rows of tiers.parquet built in Rust: `pyarrow.record_batch(batch)` takes them
    through the Arrow PyCapsule interface, without a copy."""

    def __len__(self) -> int: ...
    def __arrow_c_array__(
        self, requested_schema: object | None = None
    ) -> tuple[object, object]: ...

def expression_error(kind: str, text: str) -> str | None:
    """None if `text` compiles as a JSONPath (`kind` "json") or regular expression
    ("regex") for a flow's capture or check, else why not."""

def flows_error(flows: list[EngineFlow]) -> str | None:
    """None if the engine compiles `flows` (as in the config of `start`), else why not."""

def grpc_method(method: str, proto: str, import_paths: list[str], data: str) -> bool:
    """Whether the gRPC `method` (`package.Service/Method`) of `proto` answers with a
    stream, once `data` (its request message as JSON, strings possibly templates) is
    checked against it. A ValueError's args are the plan's field at fault (`proto`,
    `grpc` or `data`) and why."""

def start(config: EngineConfig) -> LoadRun:
    """Starts a run on background threads and returns at once. A ValueError names the
    key of `config` that is wrong, or says why the run cannot go."""

def config_records() -> dict[str, dict[str, bool]]:
    """The keys of each record of the configuration as the engine reads it, by path
    (`flows[].steps[]`; "" the whole), each True if its value may be None."""

def merged_latency(histograms: list[bytes]) -> dict[str, Any]:
    """The histograms (V2 bytes, a step's `hdr_v2`) added together, as a step's entry:
    `percentiles_us`, `min_us`, `max_us` and `mean_us` (the last three only when they
    hold a value) and the sum's `hdr_v2`."""

def records_to_parquet(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> int:
    """Converts a records stream to Parquet; returns the number of rows."""

def remote_write_body(
    series: list[tuple[list[tuple[str, str]], float]], timestamp_ms: int
) -> bytes:
    """A Prometheus remote-write body: each (labels, value) one series of one sample at
    `timestamp_ms`, as a WriteRequest (protobuf), snappy-compressed."""

def remote_write_read(body: bytes) -> list[tuple[list[tuple[str, str]], list[tuple[float, int]]]]:
    """A remote-write body read back: each series' labels and its (value, timestamp_ms).
    A ValueError says what could not be read (snappy, WriteRequest)."""
