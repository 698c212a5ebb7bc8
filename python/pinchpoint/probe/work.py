"""The probe's query parsing and the bounded work it does, shared by WSGI and ASGI."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qsl

PROBE_PATH = "/sys_perf_check"
DEFAULT_CPU_MS = 10.0
DEFAULT_MAX_MS = 1000.0
# The variable naming the probe's log when the code gives none: set in the app server's
# environment, it is also where `pinchpoint init` finds the log.
LOG_ENV = "PINCHPOINT_PROBE_LOG"


def log_path_of(given: str | os.PathLike[str] | None) -> str | os.PathLike[str] | None:
    """The log the probe writes: the one given, else $PINCHPOINT_PROBE_LOG, else none."""
    return given if given is not None else (os.environ.get(LOG_ENV) or None)


MAX_BYTES = 10 * 1024 * 1024
WORK_PARAMS = ("cpu", "wait", "bytes")
TAG_PARAMS = frozenset({"pp_run", "pp_users", "pp_rate", "pp_req"})
ALLOWED_METHODS = ("GET", "HEAD")


@dataclass(frozen=True)
class Work:
    cpu_ms: float = DEFAULT_CPU_MS
    wait_ms: float = 0.0
    size: int | None = None


@dataclass(frozen=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    @property
    def status_line(self) -> str:
        return f"{self.status} {HTTPStatus(self.status).phrase}"


class BadParameter(ValueError):
    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"{name}: {problem}")


def check_options(path: str, max_ms: float) -> None:
    """Reject middleware options that would make the probe unreachable or unbounded."""
    if not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    if not (isinstance(max_ms, int | float) and math.isfinite(max_ms) and max_ms >= 0):
        raise ValueError(f"max_ms must be a finite number >= 0, got {max_ms!r}")


def plan(method: str, query: str, max_ms: float) -> Work | Response:
    """The work a probe request asks for, or the 405/400 response refusing it."""
    if method not in ALLOWED_METHODS:
        return _text(
            405,
            f"method {method} is not allowed on the probe; use GET or HEAD\n",
            [("Allow", ", ".join(ALLOWED_METHODS))],
        )
    try:
        return parse_work(query, max_ms)
    except BadParameter as exc:
        return _text(400, f"bad parameter {exc}\n")


def parse_work(query: str, max_ms: float) -> Work:
    """Parse ``cpu``, ``wait`` and ``bytes`` from a query string; the tag is ignored."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in TAG_PARAMS:
            continue
        if name not in WORK_PARAMS:
            raise BadParameter(_show(name), "unknown parameter (expected cpu, wait or bytes)")
        if name in values:
            raise BadParameter(name, "given more than once")
        values[name] = value
    cpu_ms = _parse_ms("cpu", values.get("cpu"), DEFAULT_CPU_MS)
    wait_ms = _parse_ms("wait", values.get("wait"), 0.0)
    if cpu_ms + wait_ms > max_ms:
        raise BadParameter(
            "cpu + wait", f"{cpu_ms + wait_ms:g} ms is above the cap of {max_ms:g} ms"
        )
    return Work(cpu_ms, wait_ms, _parse_size(values.get("bytes")))


def _parse_ms(name: str, value: str | None, default: float) -> float:
    if value is None:
        return default
    if value == "":
        raise BadParameter(name, "missing value (expected milliseconds, e.g. 2.5)")
    try:
        ms = float(value)
    except ValueError:
        raise BadParameter(name, f"{_show(value)} is not a number of milliseconds") from None
    if not math.isfinite(ms):
        raise BadParameter(name, f"must be a finite number, got {_show(value)}")
    if ms < 0:
        raise BadParameter(name, f"must not be negative, got {_show(value)}")
    return ms


def _parse_size(value: str | None) -> int | None:
    if value is None:
        return None
    if not (value.isascii() and value.isdigit()):
        raise BadParameter("bytes", f"must be a whole number of bytes, got {_show(value)}")
    digits = value.lstrip("0") or "0"
    if len(digits) > len(str(MAX_BYTES)) or int(digits) > MAX_BYTES:
        raise BadParameter("bytes", f"{_show(value)} is above the cap of {MAX_BYTES}")
    return int(digits)


def _show(text: str) -> str:
    """Quote user input for an error message, cut short so a long query is not echoed back."""
    return repr(text[:40] + "...") if len(text) > 40 else repr(text)


def burn_cpu(ms: float) -> None:
    """Keep the calling thread busy until it has used ``ms`` of CPU time.

    Thread CPU time, not wall time: when the CPU is contended, the wall time stretches as it
    would for real work.
    """
    end = time.thread_time() + ms / 1000
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x ^= i * i


def report(work: Work, elapsed_s: float) -> Response:
    """The 200 response for finished work: a JSON summary, padded to ``work.size`` if given."""
    summary = {
        "cpu_ms": work.cpu_ms,
        "wait_ms": work.wait_ms,
        "bytes": work.size,
        "elapsed_ms": round(elapsed_s * 1000, 3),
    }
    body = _self_sized(summary) if work.size is None else _padded(summary, work.size)
    return Response(200, _headers("application/json", len(body)), body)


def _self_sized(summary: Mapping[str, object]) -> bytes:
    size = 0
    # The length's own digits lengthen the body; this settles within two rounds.
    for _ in range(4):
        body = json.dumps({**summary, "bytes": size}).encode()
        if len(body) == size:
            break
        size = len(body)
    return body


def _padded(summary: Mapping[str, object], size: int) -> bytes:
    """Exactly ``size`` bytes: the summary then spaces (still valid JSON), or only spaces when
    the summary does not fit."""
    body = json.dumps(summary).encode()
    if len(body) > size:
        return b" " * size
    return body + b" " * (size - len(body))


def without_body(response: Response) -> Response:
    """The answer to HEAD: the same headers, Content-Length included, and no body."""
    return dataclasses.replace(response, body=b"")


def _text(status: int, message: str, extra: list[tuple[str, str]] | None = None) -> Response:
    body = message.encode()
    return Response(status, _headers("text/plain; charset=utf-8", len(body)) + (extra or []), body)


def _headers(content_type: str, length: int) -> list[tuple[str, str]]:
    return [
        ("Content-Type", content_type),
        ("Content-Length", str(length)),
        ("Cache-Control", "no-store"),
    ]
