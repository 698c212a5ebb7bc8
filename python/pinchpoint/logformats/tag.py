"""The tag every request carries: run id, load level of the step, request id.

In the URL query it is `pp_run=<run id>&pp_users=<users>&pp_req=<request id>`, in the
header `X-Pinchpoint: run=<run id>; users=<users>; req=<request id>`.

Open-loop runs send `pp_rate=<rate>` (header `rate=<rate>`) instead of the users: the
phase's target rate in requests per second, a decimal such as `5`, `7.5` or `0.833`.
Such a tag parses with `users` 0 and `rate` set; its records join their phase by
request id.

`req_id` is optional when parsing: a record holding `pp_run` and `pp_users` but no
`pp_req` still belongs to a run and a load level (tiers.parquet allows a null req_id).
A field that is present but malformed makes the whole tag invalid (None): a damaged
tag must never be matched to a run. So does a number out of range, however many digits
it has: it is refused before it is converted.

Every tagged request also carries W3C trace context: `traceparent:
00-<trace id>-<span id>-01` (sampled) and `baggage: pp.run=<run id>,pp.users=<users>` (or
`pp.rate=`). The trace id is `<run half><req_id>` in hex, 16 digits each, the run half
FNV-1a of the run id with its top bit set (`trace_id`), so a span names its run and
request (`request_of_trace`); the span id is `req_id * 2 + 1`.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

HEADER = "X-Pinchpoint"

RUN_ID = re.compile(r"[A-Za-z0-9_.-]+")
_DECIMAL = re.compile(r"[0-9]+")
_MAX_USERS = 2**32 - 1  # tiers.parquet: users is uint32
_MAX_REQ_ID = 2**64 - 1  # req_id is uint64

# A query field starts the text or follows a query separator, whitespace or a quote.
_QUERY_FIELD = re.compile(r"(?:^|(?<=[?&;\s\"']))pp_(run|users|rate|req)=([^&;\s\"'#]*)")
_RATE = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,6})?")


@dataclass(frozen=True, slots=True)
class Tag:
    run_id: str
    users: int
    req_id: int | None
    # Open loop: the phase's target rate (requests per second); users is then 0.
    rate: float | None = None


def check_run_id(run_id: str) -> str:
    """Return `run_id` if it matches `[A-Za-z0-9_.-]+`, else raise ValueError."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(f"invalid run id {run_id!r}: use only letters, digits, '_', '.', '-'")
    return run_id


def find_tag(text: str) -> Tag | None:
    """The tag in a URI, query string or request line, or None if there is no valid one."""
    if "pp_run=" not in text:
        return None
    fields: dict[str, str] = {}
    for match in _QUERY_FIELD.finditer(text):
        fields.setdefault(match.group(1), match.group(2))
    return _tag(fields.get("run"), fields.get("users"), fields.get("req"), fields.get("rate"))


def parse_header(value: str) -> Tag | None:
    """The tag in an `X-Pinchpoint` header value, or None if it is missing or invalid."""
    fields: dict[str, str] = {}
    for part in value.split(";"):
        key, sep, field = part.partition("=")
        if sep:
            fields.setdefault(key.strip().lower(), field.strip())
    return _tag(fields.get("run"), fields.get("users"), fields.get("req"), fields.get("rate"))


def from_baggage(attributes: Mapping[str, object]) -> Tag | None:
    """The tag in a span's attributes copied from the request's `baggage` (`pp.run`,
    `pp.users` or `pp.rate`, as OpenTelemetry's baggage span processor copies them), or
    None if they hold none."""

    def text(key: str) -> str | None:
        value = attributes.get(key)
        return None if value is None else str(value)

    return _tag(text("pp.run"), text("pp.users"), None, text("pp.rate"))


def query_suffix(run_id: str, users: int, req_id: int) -> str:
    """The query fields of the tag, without a leading `?` or `&`."""
    _check(run_id, users, req_id)
    return f"pp_run={run_id}&pp_users={users}&pp_req={req_id}"


def header_value(run_id: str, users: int, req_id: int) -> str:
    """The value of the `X-Pinchpoint` header."""
    _check(run_id, users, req_id)
    return f"run={run_id}; users={users}; req={req_id}"


def _check(run_id: str, users: int, req_id: int) -> None:
    check_run_id(run_id)
    if not 0 <= users <= _MAX_USERS:
        raise ValueError(f"users out of range: {users}")
    if not 0 <= req_id <= _MAX_REQ_ID:
        raise ValueError(f"request id out of range: {req_id}")


def _tag(
    run_id: str | None, users: str | None, req_id: str | None, rate: str | None = None
) -> Tag | None:
    if run_id is None or not RUN_ID.fullmatch(run_id):
        return None
    rate_n: float | None = None
    if users is not None:
        users_n = _integer(users, _MAX_USERS)
    elif rate is not None and _RATE.fullmatch(rate):
        users_n, rate_n = 0, float(rate)
    else:
        return None
    if users_n is None:
        return None
    if req_id is None:
        return Tag(run_id, users_n, None, rate_n)
    req_n = _integer(req_id, _MAX_REQ_ID)
    if req_n is None:
        return None
    return Tag(run_id, users_n, req_n, rate_n)


def _integer(text: str, maximum: int) -> int | None:
    """The value of a decimal field (leading zeros allowed) if it is at most `maximum`."""
    if not _DECIMAL.fullmatch(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None  # more than `maximum`, and int() would refuse past 4,300 digits
    value = int(digits)
    return value if value <= maximum else None


def _run_half(run_id: str) -> int:
    """FNV-1a (64 bits) of the run id, top bit set: as the engine computes it."""
    value = 0xCBF29CE484222325
    for byte in run_id.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value | (1 << 63)


def trace_id(run_id: str, req_id: int) -> str:
    """The trace id (32 hex digits) of a tagged request of `run_id`."""
    return f"{_run_half(run_id):016x}{req_id:016x}"


def span_id(req_id: int) -> str:
    """The span id (16 hex digits) the engine gives a request in its `traceparent`."""
    return f"{(req_id << 1 | 1) & 0xFFFFFFFFFFFFFFFF:016x}"


def request_of_trace(run_id: str, trace: str) -> int | None:
    """The request id of a trace id (hex, any case) of `run_id`; None when the trace is
    not one of that run's requests."""
    if len(trace) != 32 or trace[:16].lower() != f"{_run_half(run_id):016x}":
        return None
    try:
        return int(trace[16:], 16)
    except ValueError:
        return None
