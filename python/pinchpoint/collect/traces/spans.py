"""Spans as pinchpoint keeps them: what a tier record needs of an OTLP span, in bounded size.

The decoders (`otlp_json.py`, `otlp_proto.py`) read a payload's spans into SpanFields and
hand each to `keep`: a span that lacks what a tier record needs (ids of the right length,
an end after its start, a duration under a day) is rejected and counted, the others are
kept with their name and attribute values cut to a few hundred characters (a URL keeps its
address and the run's tag, which is all that is read of it), so that a span with long
attributes keeps about 1 to 3 KB, not 25. A payload that is not an export request at all
raises PayloadError (the receiver answers 400).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# OTLP SpanKind.
INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER = 1, 2, 3, 4, 5
MAX_SPAN_NS = 86_400 * 10**9
# The attributes a tier record is made from; others are not kept.
URL_KEYS = frozenset({"http.target", "http.url", "url.full", "url.query", "url.path"})
STATUS_KEYS = frozenset({"http.status_code", "http.response.status_code"})
# The request's baggage, as the baggage span processor copies it: the load level of a
# call whose URL carries no tag (gRPC).
BAGGAGE_KEYS = frozenset({"pp.run", "pp.users", "pp.rate"})
KEPT = URL_KEYS | STATUS_KEYS | BAGGAGE_KEYS | frozenset(
    {"db.system", "db.system.name", "peer.service", "server.address", "net.peer.name", "rpc.service"}
)  # fmt: skip
MAX_NAME_CHARS = 200
MAX_VALUE_CHARS = 128  # of a kept attribute's text; a URL longer than this keeps its essentials
MAX_TAG_FIELD_CHARS = 64
_TAG_FIELD = re.compile(r"(?:^|(?<=[?&;\s\"']))pp_(run|users|rate|req)=([^&;\s\"'#]*)")
# Names, services and attribute values repeat across spans: each is kept once.
_SHARED: dict[str, str] = {}
_SHARED_MAX = 100_000
Value = str | int | float | bool


class PayloadError(ValueError):
    """The body is not an OTLP export request."""


@dataclass(frozen=True, slots=True)
class Span:
    trace_id: str  # 32 lowercase hex digits
    span_id: str  # 16
    parent_id: str | None
    service: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Value] = field(default_factory=dict)


@dataclass(slots=True)
class SpanFields:
    """A span as a decoder read it, before it is checked and kept."""

    service: Value | None = None
    trace_id: str = ""
    span_id: str = ""
    parent_id: str = ""
    name: str = ""
    kind: int | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    attributes: dict[str, Value] = field(default_factory=dict)


@dataclass
class Decoded:
    spans: list[Span] = field(default_factory=list)
    rejected: int = 0  # spans without what a record needs


def keep(out: Decoded, read: SpanFields) -> None:
    """Adds the span `read` to `out`, or counts it rejected."""
    start_ns, end_ns = read.start_ns, read.end_ns
    ok = (
        _is_id(read.trace_id, 32)
        and _is_id(read.span_id, 16)
        and (read.parent_id == "" or _is_id(read.parent_id, 16))
        and start_ns is not None
        and end_ns is not None
        and 0 < start_ns <= end_ns
        and end_ns - start_ns <= MAX_SPAN_NS
    )
    if not ok or start_ns is None or end_ns is None:
        out.rejected += 1
        return
    service = read.service
    kinds = (INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER)
    out.spans.append(
        Span(
            trace_id=read.trace_id.lower(),
            span_id=read.span_id.lower(),
            parent_id=read.parent_id.lower() or None,
            service=_shared(_clean(str(service)[:MAX_VALUE_CHARS]))
            if service not in (None, "")
            else "unknown_service",
            name=_shared(_clean(read.name[:MAX_NAME_CHARS])),
            kind=read.kind if read.kind in kinds else INTERNAL,
            start_ns=start_ns,
            end_ns=end_ns,
            attributes=_kept(read.attributes),
        )
    )


def span_bytes(span: Span) -> int:
    """About the bytes `span` takes in memory, its shared strings counted in full."""
    texts = len(span.name) + len(span.service)
    for value in span.attributes.values():
        texts += len(value) if isinstance(value, str) else 0
    return 600 + 110 * len(span.attributes) + texts


def _kept(attributes: dict[str, Value]) -> dict[str, Value]:
    out: dict[str, Value] = {}
    for key, value in attributes.items():
        if key in STATUS_KEYS:
            if isinstance(value, int) and not isinstance(value, bool):
                out[key] = value
        elif isinstance(value, str):
            text = _url_essentials(value) if key in URL_KEYS else value[:MAX_VALUE_CHARS]
            out[key] = _shared(_clean(text))
        else:
            out[key] = value
    return out


def _url_essentials(url: str) -> str:
    """`url` itself when short, else what is read of it: its scheme and address and the
    run's tag (`pp_run=…&pp_users=…&pp_req=…`)."""
    if len(url) <= MAX_VALUE_CHARS:
        return url
    head = url[: 8 * MAX_VALUE_CHARS]
    try:
        parts = urlsplit(head)
        address = f"{parts.scheme}://{parts.netloc[:MAX_VALUE_CHARS]}" if parts.netloc else ""
    except ValueError:
        address = ""
    tag = "&".join(
        f"pp_{match.group(1)}={match.group(2)[:MAX_TAG_FIELD_CHARS]}"
        for _, match in zip(range(8), _TAG_FIELD.finditer(url), strict=False)
    )
    return f"{address}/?{tag}" if tag else address


def _clean(text: str) -> str:
    """`text` as it can be written: a lone surrogate (JSON's `\\ud800`) becomes U+FFFD."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8", "replace")


def _shared(text: str) -> str:
    if len(text) > MAX_VALUE_CHARS:
        return text
    found = _SHARED.get(text)
    if found is not None:
        return found
    if len(_SHARED) >= _SHARED_MAX:
        _SHARED.clear()
    _SHARED[text] = text
    return text


def _is_id(value: str, digits: int) -> bool:
    if len(value) != digits or not value.isascii() or value.strip("0") == "":
        return False
    try:
        int(value, 16)
    except ValueError:
        return False
    return True
