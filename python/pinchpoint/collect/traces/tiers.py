"""A run's spans turned into tier records, the way log lines are.

A trace belongs to the run when its trace id is one the engine gave a request of the run
(`logformats/tag.py`); its request id comes from the trace id and its load level from the
tag in the URL of a span of that trace (the server span of the entry tier). Spans of other
traces count as `other_run`; those of a trace of the run with no tagged span as `untagged`.

Each server, consumer, client or producer span (and a trace's root) is a record of a tier:
a server span's tier is its service (`app`), a client span's the call it makes inside its
service, named for the service whose server span answered it (`gateway/svc-a`), else for
the one service that answered calls to the same address in other traces, else by its
attributes or its name (`app/sqlite`, `app/127.0.0.1`): HTTP client instrumentations name
every call `GET`, and calls to two services must stay two tiers. Its duration is the
span's, and its upstream time the union of the intervals of the spans it waits on (its
descendants in other tiers, seen through the internal spans of its own service), so two
children running in parallel are not subtracted twice; a call answered by an instrumented
service waits on it for all of its duration, so what it takes beyond that service's span
counts as the service's queue: each call its own, when calls run side by side. Those
children make the calls between tiers (`calls`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pinchpoint.collect.logs.reader import TierRow
from pinchpoint.collect.traces.spans import CLIENT, CONSUMER, INTERNAL, PRODUCER, SERVER, Span
from pinchpoint.logformats.tag import find_tag, from_baggage, request_of_trace

KINDS = {
    INTERNAL: "internal",
    SERVER: "server",
    CLIENT: "client",
    PRODUCER: "producer",
    CONSUMER: "consumer",
}
_URL_KEYS = ("http.target", "url.query", "url.full", "http.url")
_ADDRESS_KEYS = ("url.full", "http.url")
_STATUS_KEYS = ("http.response.status_code", "http.status_code")
_CALLEE_KEYS = (
    "peer.service",
    "db.system.name",
    "db.system",
    "rpc.service",
    "server.address",
    "net.peer.name",
)


@dataclass
class SpanCounts:
    """Spans received for a run, per the component they made: `spans == matched +
    other_run + untagged + unparseable` (spans without what a record needs)."""

    spans: int = 0
    matched: int = 0
    other_run: int = 0
    untagged: int = 0
    unparseable: int = 0


@dataclass
class SpanTiers:
    rows: list[TierRow] = field(default_factory=list)
    counts: dict[str, SpanCounts] = field(default_factory=lambda: defaultdict(SpanCounts))
    calls: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def tiers_of(spans: Iterable[Span], run_id: str) -> SpanTiers:
    out = SpanTiers()
    grouped: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        grouped[span.trace_id].append(span)
    traces = [_Trace(members) for members in grouped.values()]
    known = _known_callees(traces)
    for trace in traces:
        names = _components(trace, known)
        req_id = request_of_trace(run_id, trace.members[0].trace_id)
        users = None if req_id is None else _users(trace.members, run_id, req_id)
        if req_id is None or users is None:
            for span in trace.members:
                _count(out, names[span.span_id], "other_run" if req_id is None else "untagged")
            continue
        _trace_rows(out, trace, names, req_id, users)
    return out


def component_of(span: Span, answered_by: str | None = None) -> str:
    """A server or consumer span's tier is its service; a client or producer span's is
    `service/callee`, the callee the service that answered it (`answered_by`) if known."""
    if span.kind not in (CLIENT, PRODUCER):
        return span.service
    return f"{span.service}/{answered_by or _named_callee(span)}"


def _named_callee(span: Span) -> str:
    callee = next((span.attributes[k] for k in _CALLEE_KEYS if k in span.attributes), None)
    return str(callee) if callee not in (None, "") else span.name


class _Trace:
    """The spans of one trace, by id and by parent, and the service that answered each of
    its calls that an instrumented service answered."""

    def __init__(self, members: list[Span]) -> None:
        self.members = members
        self.by_id = {span.span_id: span for span in members}
        self.children: dict[str, list[Span]] = defaultdict(list)
        for span in members:
            if span.parent_id is not None:
                self.children[span.parent_id].append(span)
        self.answered: dict[str, str] = {}
        for span in members:
            answer = _answer_of(span, self.children)
            if answer is not None:
                self.answered[span.span_id] = answer.service


def _answer_of(span: Span, children: dict[str, list[Span]]) -> Span | None:
    """The first server or consumer span under a call, through the caller's internal spans."""
    if span.kind not in (CLIENT, PRODUCER):
        return None
    answers = [c for c in _under(span, children) if c.kind in (SERVER, CONSUMER)]
    return min(answers, key=lambda s: s.start_ns, default=None)


def _under(span: Span, children: dict[str, list[Span]]) -> list[Span]:
    """The spans under `span` that are not its own service's internal spans, found through
    those internal spans."""
    found: list[Span] = []
    todo = list(children.get(span.span_id, ()))
    seen = {span.span_id}
    while todo:
        child = todo.pop()
        if child.span_id in seen:
            continue
        seen.add(child.span_id)
        if child.kind == INTERNAL and child.service == span.service:
            todo.extend(children.get(child.span_id, ()))
        else:
            found.append(child)
    return found


def _address(span: Span) -> tuple[str, str]:
    """Where a call goes, as its caller saw it: the URL's host and port, else its callee."""
    for key in _ADDRESS_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and (netloc := urlsplit(value).netloc):
            return span.service, netloc
    return span.service, _named_callee(span)


def _known_callees(traces: Iterable[_Trace]) -> dict[tuple[str, str], str]:
    """The callee of each address that one service alone answered: a call whose answer's
    span is missing (lost, refused, timed out) still counts in its callee's tier."""
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for trace in traces:
        for span_id, service in trace.answered.items():
            seen[_address(trace.by_id[span_id])].add(service)
    return {address: services.pop() for address, services in seen.items() if len(services) == 1}


def _components(trace: _Trace, known: dict[tuple[str, str], str]) -> dict[str, str]:
    """Each span's tier, by span id."""
    names = {}
    for span in trace.members:
        callee = trace.answered.get(span.span_id)
        if callee is None and span.kind in (CLIENT, PRODUCER):
            callee = known.get(_address(span))
        names[span.span_id] = component_of(span, callee)
    return names


def _count(out: SpanTiers, component: str, what: str) -> None:
    counts = out.counts[component]
    counts.spans += 1
    setattr(counts, what, getattr(counts, what) + 1)


def _users(members: list[Span], run_id: str, req_id: int) -> int | None:
    """The trace's load level: from the tag in a span's URL, else from the request's
    baggage copied into a span's attributes (a gRPC call's path has no query)."""
    for span in members:
        for key in _URL_KEYS:
            value = span.attributes.get(key)
            tag = find_tag(value) if isinstance(value, str) else None
            if tag is not None and tag.run_id == run_id and tag.req_id in (None, req_id):
                return tag.users
    for span in members:
        tag = from_baggage(span.attributes)
        if tag is not None and tag.run_id == run_id:
            return tag.users
    return None


def _trace_rows(
    out: SpanTiers, trace: _Trace, names: dict[str, str], req_id: int, users: int
) -> None:
    for span in trace.members:
        component = names[span.span_id]
        root = span.parent_id is None or span.parent_id not in trace.by_id
        if span.kind == INTERNAL and not root:
            _count(out, component, "matched")  # folded into its service's record
            continue
        waited = _waited_on(span, trace.children, names)
        for callee in {names[child.span_id] for child in waited}:
            out.calls[component].add(callee)
        upstream_s = _union_s(span, waited) if waited else None
        if span.kind in (CLIENT, PRODUCER) and any(c.kind in (SERVER, CONSUMER) for c in waited):
            # A call answered by an instrumented service waits on it the whole time: what
            # the call takes beyond the service's own span is that service's accept queue
            # and the network, as a proxy's upstream time holds its upstream's queue.
            upstream_s = (span.end_ns - span.start_ns) / 1e9
        status = next((span.attributes[k] for k in _STATUS_KEYS if k in span.attributes), None)
        out.rows.append(
            TierRow(
                component=component,
                users=users,
                req_id=req_id,
                ts=span.end_ns / 1e9,
                duration_s=(span.end_ns - span.start_ns) / 1e9,
                upstream_s=upstream_s,
                status=status if isinstance(status, int) and 100 <= status <= 999 else None,
                span_kind=KINDS.get(span.kind),
                parent=_caller(span, trace.by_id, names),
            )
        )
        _count(out, component, "matched")


def _caller(span: Span, by_id: dict[str, Span], names: dict[str, str]) -> str | None:
    """The tier of the nearest ancestor that is a record, through internal spans."""
    seen = {span.span_id}
    parent = by_id.get(span.parent_id or "")
    while parent is not None and parent.span_id not in seen:
        seen.add(parent.span_id)
        is_root = parent.parent_id is None or parent.parent_id not in by_id
        if parent.kind != INTERNAL or is_root:
            return names[parent.span_id]
        parent = by_id.get(parent.parent_id or "")
    return None


def _waited_on(span: Span, children: dict[str, list[Span]], names: dict[str, str]) -> list[Span]:
    """The spans of other tiers under `span`, looking through its own internal spans."""
    mine = names[span.span_id]
    return [c for c in _under(span, children) if names[c.span_id] != mine or c.kind != span.kind]


def _union_s(span: Span, waited: list[Span]) -> float:
    """Seconds of `span` covered by the union of the intervals of `waited`."""
    intervals = sorted((max(c.start_ns, span.start_ns), min(c.end_ns, span.end_ns)) for c in waited)
    total = 0
    end = span.start_ns
    for start, stop in intervals:
        start = max(start, end)
        if stop > start:
            total += stop - start
            end = stop
    return total / 1e9
