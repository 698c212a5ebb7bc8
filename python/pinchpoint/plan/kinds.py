"""What each record of a run is, its kind, as the engine counts it (crates/pinchpoint-engine
`kind.rs`): an HTTP `request`, a WebSocket session (`ws_session`, its connection from the
upgrade to the close) or one of its messages (`ws_message`), a gRPC call (`grpc_call`) or
one message of a call's answer stream (`grpc_message`).

A request or flow step is one record of its own kind, followed by one record per message
it names (a WebSocket's) and one for the messages of its answer stream (a streaming
call's), in the order of the records' `endpoint` index (`Plan.endpoints()`).

The exchanges the load schedules, a user's turn or an open-loop arrival, are the requests,
the sessions and the calls (`EXCHANGES`): a bare `[sla] error_rate` is the share of them
that failed, so that a gRPC run's is its calls', a WebSocket run's its sessions', an HTTP
run's its requests'. The messages are counted apart.
"""

from __future__ import annotations

from typing import Protocol

KINDS = ("request", "ws_session", "ws_message", "grpc_call", "grpc_message")
EXCHANGES = ("request", "ws_session", "grpc_call")


class Sends(Protocol):
    """A request or a flow step, as far as its records go."""

    ws: str | None
    grpc: str | None

    @property
    def message(self) -> list: ...

    def streams(self) -> bool: ...


def record_kinds(sends: Sends) -> list[str]:
    """The kinds of the records of one request or flow step, its own first."""
    if sends.ws is not None:
        own = "ws_session"
    elif sends.grpc is not None:
        own = "grpc_call"
    else:
        own = "request"
    streamed = ["grpc_message"] if sends.streams() else []
    return [own, *["ws_message"] * len(sends.message), *streamed]


def exchange_kinds(kinds: list[str]) -> list[str]:
    """The kinds of `kinds` a bare error rate is judged on, in KINDS order."""
    return [k for k in EXCHANGES if k in kinds]
