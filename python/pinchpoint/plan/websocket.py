"""WebSocket steps: a flow step with `ws = "/path"` sends its request as an upgrade on a
connection of its own (tagged like any request), then carries its messages in order and
closes. A message sends a frame (`send`, a template; `binary = true` for a binary frame
of its text's bytes), receives the next frame (unless `receive = false`), or both; what
it receives is checked and captured from as a response body is.

    [[flow.step]]
    name = "room"
    ws = "/ws/chat?room=${room}"

    [[flow.step.message]]
    name = "hello"
    send = '{"say": "hello from ${user_index}"}'
    check = { json = { "$.said" = "hello from ${user_index}" }, max_ms = 100 }
"""

from __future__ import annotations

from pydantic import Field, model_validator

from pinchpoint.plan.answers import Capture, Check
from pinchpoint.plan.toml import FieldError, Strict


def upgrade_fault(
    path: str, ws: str | None, method: str, body: str, messages: list[Message]
) -> tuple[str, str] | None:
    """(field, why) when a request's `path`, `ws` and messages do not make one request:
    a path, or a WebSocket upgrade (a GET without a body) carrying the messages."""
    if ws is None and not path:
        return "path", "set path, or ws for a WebSocket"
    if ws is not None and path:
        return "path", "set path or ws, not both"
    if ws is None:
        if messages:
            return "message", 'messages travel on a WebSocket: set ws = "/path", not path'
        return None
    if method != "GET":
        return "method", f"a WebSocket upgrade is a GET, not {method}"
    if body:
        return "body", "a WebSocket upgrade has no body: send it as a message"
    return None


def request_label(method: str, path: str, ws: str | None) -> str:
    """A request as the run's tables name it: `METHOD path`, or `WS path`."""
    return f"{method} {path}" if ws is None else f"WS {ws}"


def message_names(label: str, messages: list[Message]) -> list[str]:
    """The names of the records of messages sent on the request named `label`."""
    return [f"{label}/{m.label(k)}" for k, m in enumerate(messages)]


class Message(Strict):
    name: str | None = None
    send: str | None = None
    binary: bool = False
    receive: bool = True
    capture: list[Capture] = Field(default_factory=list)
    check: Check | None = None

    @model_validator(mode="after")
    def _reads_a_frame(self) -> Message:
        if self.send is None and not self.receive:
            raise FieldError("receive", "a message sends a frame, receives one, or both")
        if not self.receive and (self.capture or self.check is not None):
            raise FieldError("receive", "checks and captures read the frame received")
        if self.binary and self.send is None:
            raise FieldError("binary", "binary applies to the frame sent: set send")
        if self.check is not None:
            if self.check.status is not None:
                raise FieldError(("check", "status"), "a frame has no status")
            if self.check.header:
                raise FieldError(("check", "header"), "a frame has no headers")
        for k, c in enumerate(self.capture):
            if c.header is not None or c.cookie is not None:
                raise FieldError(
                    ("capture", k), "a frame has no headers or cookies: use json or regex"
                )
        return self

    def label(self, k: int) -> str:
        """As the run's tables name it after its step: its name, or its number."""
        return self.name or f"#{k + 1}"

    def templates(self) -> list[tuple[tuple, str]]:
        found: list[tuple[tuple, str]] = [] if self.send is None else [(("send",), self.send)]
        if self.check is not None:
            found += [(("check", *loc), t) for loc, t in self.check.templates()]
        return found
