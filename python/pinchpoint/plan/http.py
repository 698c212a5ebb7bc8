"""What the plan sends and where: the `[target]` and its `[[request]]`s. A URL, a
method, a header name or value that could not be sent as written is refused here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, PrivateAttr, field_validator, model_validator

from pinchpoint.plan.grpc import (
    STREAM_RECORD,
    check_call,
    data_text,
    grpc_fault,
    grpc_label,
    without_grpc,
)
from pinchpoint.plan.toml import Duration, FieldError, Strict
from pinchpoint.plan.user_paths import NotUsable, open_input
from pinchpoint.plan.websocket import Message, message_names, request_label, upgrade_fault

# The most of a ca_file read to find a certificate in: bundles are a few hundred KB.
MAX_CA_BYTES = 16 << 20
# An HTTP method or header name (RFC 9110 token).
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# What cannot go into a request line unescaped: space and control characters.
_NOT_IN_URL = re.compile(r"[\x00-\x20\x7f]")
# What cannot go into a header value: control characters but tab (a CR or LF splits it).
_NOT_IN_HEADER = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _unsafe(
    pattern: re.Pattern[str],
    text: str,
    what: str,
    fix: str = "escape it (%20) or remove it",
    quote: bool = True,
) -> None:
    """ValueError naming the first character of `text` that `pattern` finds; the text is
    quoted unless it may be a secret (`quote` False: a header's value)."""
    if m := pattern.search(text):
        said = f"{what} {text!r}" if quote else f"{what} the value"
        raise ValueError(f"{said} holds {m.group()!r} at character {m.start() + 1}: {fix}")


def check_url(url: str, shape: str = "http(s)://host[:port][/path]") -> str:
    """An http(s) URL with a host, a port from 1 to 65535 and no space or control
    character; raises ValueError saying what is wrong."""
    _unsafe(_NOT_IN_URL, url, "the URL")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{url!r} is not a URL ({e}): it must be {shape}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} must be {shape}")
    if port == 0:
        raise ValueError(f"{url!r}: port 0 cannot be connected to; ports go from 1 to 65535")
    return url


def _http_version(value: object) -> object:
    """`http = "2"`, `http = 2` or `http = 1.1` (TOML numbers) all name a version."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (1.1, 2):
        return "2" if value == 2 else "1.1"
    return value


class Target(Strict):
    url: str
    tag: bool = True
    # HTTP/1.1, or HTTP/2: with prior knowledge (h2c) on http://, by ALPN on https://.
    http: Annotated[Literal["1.1", "2"], BeforeValidator(_http_version)] = "1.1"
    # https: PEM certificates trusted besides the default roots, or no check at all.
    ca_file: str | None = None
    insecure: bool = False
    # HTTP/2: users (open loop: requests in flight) sharing one connection; by default
    # one connection per user, 100 streams per connection in open loop.
    streams_per_connection: int | None = Field(default=None, ge=1, le=10_000)
    # Request headers whose values are secret besides Authorization, Cookie and
    # Proxy-Authorization: sent as written, stored redacted in the run folder.
    secret_headers: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        return check_url(url)

    @field_validator("secret_headers")
    @classmethod
    def _check_secret_headers(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not _TOKEN.match(name):
                raise FieldError(index, f"{name!r} is not a header name: no space, colon or CR/LF")
        return names

    @field_validator("ca_file")
    @classmethod
    def _check_ca_file(cls, path: str | None) -> str | None:
        if path is None:
            return None
        try:
            with open_input(Path(path), MAX_CA_BYTES, "PEM file of certificates") as f:
                text = f.read(MAX_CA_BYTES).decode("utf-8", errors="replace")
        except NotUsable as e:
            raise ValueError(str(e)) from None
        if "-----BEGIN CERTIFICATE-----" not in text:
            raise ValueError(f"{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        return path

    @model_validator(mode="after")
    def _check_tls(self) -> Target:
        if not self.tls and (self.ca_file is not None or self.insecure):
            field = "ca_file" if self.ca_file is not None else "insecure"
            raise FieldError(field, f"{field} applies to https:// URLs; the URL is http://")
        if self.insecure and self.ca_file is not None:
            raise FieldError(
                "insecure", "insecure turns certificate checks off: remove it or ca_file"
            )
        if self.streams_per_connection is not None and self.http != "2":
            raise FieldError("streams_per_connection", 'streams per connection need http = "2"')
        return self

    @property
    def tls(self) -> bool:
        return urlsplit(self.url).scheme == "https"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or (443 if self.tls else 80)

    @property
    def base_path(self) -> str:
        return urlsplit(self.url).path.rstrip("/")


class Request(Strict):
    path: str = ""
    method: str = "GET"
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""
    # How often this request is sent against the plan's others (0: never).
    weight: int = Field(default=1, ge=0, le=10_000)
    # This request's own timeout, instead of [load] timeout.
    timeout: Duration | None = None
    # A WebSocket upgrade to this path instead, carrying the messages (plan/websocket.py).
    ws: str | None = None
    message: list[Message] = Field(default_factory=list, max_length=1000)
    # A gRPC call of this method instead, declared in `proto`, with `data` its request
    # message (plan/grpc.py).
    grpc: str | None = None
    proto: str | None = None
    import_paths: list[str] = Field(default_factory=list, max_length=100)
    data: dict | str | None = None
    # The call answers with a stream: each message is a record of its own.
    _streams: bool = PrivateAttr(default=False)

    @field_validator("timeout")
    @classmethod
    def _positive_timeout(cls, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise ValueError("a timeout must be above zero")
        return value

    @model_validator(mode="after")
    def _check_path(self) -> Request:
        if self.grpc is not None:
            return self._check_grpc(self.grpc)
        stray = without_grpc(self.grpc, self.proto, self.import_paths, self.data)
        if stray is not None:
            raise FieldError(
                stray, f'{stray} applies to a gRPC call: set grpc = "package.Service/Method"'
            )
        fault = upgrade_fault(self.path, self.ws, self.method, self.body, self.message)
        if fault is not None:
            raise FieldError(*fault)
        field, path = ("path", self.path) if self.ws is None else ("ws", self.ws)
        if not path.startswith("/"):
            raise FieldError(field, f"path {path!r} must start with '/'")
        try:
            _unsafe(_NOT_IN_URL, path, "the path")
        except ValueError as e:
            raise FieldError(field, str(e)) from None
        if not _TOKEN.match(self.method):
            raise FieldError(
                "method", f"{self.method!r} is not an HTTP method: letters, no space (GET, POST)"
            )
        _check_headers(self.headers)
        return self

    def _check_grpc(self, grpc: str) -> Request:
        method = self.method if "method" in self.model_fields_set else None
        fault = grpc_fault(grpc, self.ws, self.path, method)
        if fault is not None:
            raise FieldError(*fault)
        if self.message:
            raise FieldError("message", "messages travel on a WebSocket: a gRPC call sends data")
        if self.body:
            raise FieldError("body", "a gRPC call's request message is data, not body")
        _check_headers(self.headers)
        self._streams = check_call(grpc, self.proto, self.import_paths, data_text(self.data))
        return self

    def streams(self) -> bool:
        """A gRPC call answered with a stream of messages."""
        return self._streams

    def target(self) -> str:
        """The path requested: the upgrade's for a WebSocket, the method's for gRPC."""
        if self.grpc is not None:
            return "/" + self.grpc
        return self.path if self.ws is None else self.ws

    def label(self) -> str:
        """As the run's tables name it: `METHOD path`, `WS path` or `gRPC method`."""
        if self.grpc is not None:
            return grpc_label(self.grpc)
        return request_label(self.method, self.path, self.ws)

    def endpoint_labels(self, label: str) -> list[str]:
        """The names of its records, its own `label` first, then its messages' (a
        stream's: `<label>/message`)."""
        streamed = [f"{label}/{STREAM_RECORD}"] if self._streams else []
        return [label, *message_names(label, self.message), *streamed]


def _check_headers(headers: dict[str, str]) -> None:
    """FieldError on a header whose name or value could not be sent as written."""
    for name, value in headers.items():
        if not _TOKEN.match(name):
            raise FieldError(
                ("headers", name), f"{name!r} is not a header name: no space, colon or CR/LF"
            )
        try:
            fix = "a CR or LF would end the header"
            _unsafe(_NOT_IN_HEADER, value, f"header {name}:", fix, quote=False)
        except ValueError as e:
            raise FieldError(("headers", name), str(e)) from None
