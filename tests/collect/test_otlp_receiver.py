"""The OTLP receiver on 127.0.0.1: spans sent by the OpenTelemetry SDK's own exporter
(protobuf) and as OTLP/JSON become tier records of the run; malformed payloads get a
400 or 415 and are counted, never raised."""

from __future__ import annotations

import gzip
import json
import socket
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pinchpoint.collect.logs.reader import FileCounts, TierRow
from pinchpoint.collect.sources.otlp import OtlpCollector
from pinchpoint.logformats.tag import span_id, trace_id
from pinchpoint.plan.otlp import Otlp
from pinchpoint_lab.ports import free_port

pytestmark = pytest.mark.timeout(60)
RUN = "r-otlp.1"


@pytest.fixture
def collector() -> OtlpCollector:
    found = OtlpCollector([Otlp(listen=f"127.0.0.1:{free_port()}", settle=0)])
    found.start(RUN, 1.0)
    yield found
    found.close()


def url(collector: OtlpCollector) -> str:
    return f"http://127.0.0.1:{collector.receivers[0].port}/v1/traces"


def collected(collector: OtlpCollector) -> tuple[list[TierRow], dict[str, FileCounts]]:
    rows: list[TierRow] = []
    collector.stop()
    counts = collector.collect_logs(rows.extend)
    return rows, {c.component: c for c in counts}


def test_spans_from_the_sdk_exporter_become_records_of_their_requests(
    collector: OtlpCollector,
) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url(collector))))
    tracer = provider.get_tracer("test")
    for req in (3, 4):
        # As an instrumented app does: the request's traceparent is the server span's parent.
        carrier = {"traceparent": f"00-{trace_id(RUN, req)}-{span_id(req)}-01"}
        context = TraceContextTextMapPropagator().extract(carrier)
        target = f"/items?pp_run={RUN}&pp_users=5&pp_req={req}"
        attributes = {"http.target": target, "http.status_code": 200}
        with (
            tracer.start_as_current_span(
                "GET /items", context=context, kind=trace.SpanKind.SERVER, attributes=attributes
            ),
            tracer.start_as_current_span(
                "SELECT", kind=trace.SpanKind.CLIENT, attributes={"db.system": "sqlite"}
            ),
        ):
            pass
    other = TraceContextTextMapPropagator().extract(
        {"traceparent": f"00-{trace_id('another-run', 1)}-{span_id(1)}-01"}
    )
    with tracer.start_as_current_span("GET /", context=other, kind=trace.SpanKind.SERVER):
        pass
    provider.shutdown()

    rows, counts = collected(collector)
    assert sorted((r.component, r.req_id, r.users) for r in rows) == [
        ("app", 3, 5), ("app", 4, 5), ("app/sqlite", 3, 5), ("app/sqlite", 4, 5),
    ]  # fmt: skip
    app = [r for r in rows if r.component == "app"]
    assert all(r.status == 200 and 0 <= r.upstream_s <= r.duration_s for r in app)
    assert (counts["app"].lines, counts["app"].matched, counts["app"].other_run) == (3, 2, 1)
    report = collector.report()
    assert report["calls"] == {"app": ["app/sqlite"]}
    assert report["otlp"][collector.configs[0].source]["rejected_payloads"] == 0


def test_otlp_json_is_read_with_hex_ids_and_string_integers(collector: OtlpCollector) -> None:
    start = 1_800_000_000_000_000_000
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "api"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id(RUN, 12).upper(),
                                "spanId": "00000000000000aa",
                                "parentSpanId": span_id(12),
                                "name": "GET /x",
                                "kind": 2,
                                "startTimeUnixNano": str(start),
                                "endTimeUnixNano": str(start + 25_000_000),
                                "attributes": [
                                    {"key": "url.query", "value": {"stringValue": f"pp_run={RUN}&pp_users=2&pp_req=12"}},
                                    {"key": "http.response.status_code", "value": {"intValue": "503"}},
                                ],
                            },
                            {"traceId": "zz", "spanId": "01", "name": "broken"},
                        ]
                    }
                ],
            }
        ]
    }  # fmt: skip
    answer = httpx.post(url(collector), json=body)
    assert answer.status_code == 200 and answer.json() == {}
    rows, _ = collected(collector)
    assert [(r.component, r.req_id, r.users, r.status) for r in rows] == [("api", 12, 2, 503)]
    assert rows[0].duration_s == pytest.approx(0.025)
    assert collector.report()["otlp"][collector.configs[0].source]["rejected_spans"] == 1


@pytest.mark.parametrize(
    ("content_type", "body", "encoding", "status"),
    [
        ("application/x-protobuf", b"\xff\xff\xff\xff not protobuf", None, 400),
        ("application/json", b"[1, 2, 3]", None, 400),
        ("application/json", b"{" * 100_000, None, 400),
        ("application/json", b"{}", "br", 400),
        ("application/x-protobuf", b"not gzip at all", "gzip", 400),
        ("application/x-protobuf", gzip.compress(b"\0" * (40 << 20)), "gzip", 413),
        ("text/plain", b"hello", None, 415),
    ],
)
def test_a_malformed_payload_is_refused_and_counted(
    collector: OtlpCollector, content_type: str, body: bytes, encoding: str | None, status: int
) -> None:
    headers = {"Content-Type": content_type, **({"Content-Encoding": encoding} if encoding else {})}
    answer = httpx.post(url(collector), content=body, headers=headers)
    assert answer.status_code == status
    assert collected(collector) == ([], {})
    seen = collector.report()["otlp"][collector.configs[0].source]
    assert (seen["payloads"], seen["rejected_payloads"]) == (0, 1)
    assert any("refused" in p for p in collector.problems)


def _json_line(req: int, service: str = "batch") -> str:
    start = 1_800_000_000_000_000_000
    span = {
        "traceId": trace_id(RUN, req),
        "spanId": f"{req + 1:016x}",
        "name": "job",
        "kind": 5,
        "startTimeUnixNano": start,
        "endTimeUnixNano": start + 4_000_000,
        "attributes": [
            {
                "key": "url.full",
                "value": {"stringValue": f"q://x?pp_run={RUN}&pp_users=1&pp_req={req}"},
            }
        ],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return json.dumps(
        {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    )


def test_a_collector_file_is_read_from_where_it_ended_when_the_run_started(tmp_path: Path) -> None:
    spans = tmp_path / "spans.json"
    spans.write_text(_json_line(1) + "\n")  # an earlier run's line, before the mark
    collector = OtlpCollector([Otlp(file=str(spans), settle=0)])
    collector.start(RUN, 1.0)
    with spans.open("a") as f:
        f.write(_json_line(2) + "\n" + "{not json\n" + "\n" + _json_line(3) + "\n")
    rows, counts = collected(collector)
    assert sorted(r.req_id for r in rows) == [2, 3]
    assert (counts["batch"].lines, counts["batch"].matched) == (2, 2)
    assert all(r.component == "batch" and r.span_kind == "consumer" for r in rows)
    seen = collector.report()["otlp"][f"otlp file {spans}"]
    assert (seen["payloads"], seen["rejected_payloads"]) == (2, 1)
    assert "line 2" in seen["first_error"]


def test_a_missing_collector_file_is_a_problem_not_an_error(tmp_path: Path) -> None:
    collector = OtlpCollector([Otlp(file=str(tmp_path / "none.json"), settle=0)])
    collector.start(RUN, 1.0)
    assert collected(collector) == ([], {})
    assert any("cannot read" in p for p in collector.problems)
    assert any("no spans received" in p for p in collector.problems)


def test_connections_past_the_cap_are_closed_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinchpoint.collect.sources import otlp_http

    monkeypatch.setattr(otlp_http, "MAX_CONNECTIONS", 2)
    found = OtlpCollector([Otlp(listen=f"127.0.0.1:{free_port()}", settle=0)])
    found.start(RUN, 1.0)
    port = found.receivers[0].port
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        with socket.create_connection(("127.0.0.1", port)) as third:
            third.settimeout(5)
            try:
                answer = third.recv(100)
            except ConnectionResetError:
                answer = b""
        assert answer == b"", "the third connection was served"
        idle.pop().close()  # frees a slot once its handler sees the end
        served = None
        for _ in range(50):
            try:
                served = httpx.post(
                    url(found),
                    content=b'{"resourceSpans": []}',
                    headers={"Content-Type": "application/json"},
                    timeout=2,
                )
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert served is not None and served.status_code == 200
        for sock in idle:
            sock.close()
        rows, _counts = collected(found)
    finally:
        found.close()
    seen = found.report()["otlp"][found.configs[0].source]
    assert (seen["payloads"], seen["rejected_payloads"]) == (1, 1)
    assert "past 2 at once" in seen["first_error"] and rows == []
