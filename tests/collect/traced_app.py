"""Flask apps instrumented with OpenTelemetry as users instrument theirs: the Flask and
SQLite instrumentations, spans exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
in batches, the service named by TRACED_SERVICE.

`app` serves /items (one SQLite query of some CPU work) and /fanout, which also calls the
second service's /work over HTTP, after the query (`mode=seq`) or beside it (`mode=par`),
in a client span that carries the trace on, as HTTP client instrumentations do. `svc2`
serves /work: a sleep of SVC2_SLEEP_MS."""

from __future__ import annotations

import contextvars
import os
import sqlite3
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from flask import Flask, request
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.sqlite3 import SQLite3Instrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

ROWS = int(os.environ.get("TRACED_APP_ROWS", "20000"))
SVC2 = os.environ.get("SVC2_URL", "")
SVC2_SLEEP_S = float(os.environ.get("SVC2_SLEEP_MS", "5")) / 1000

service = os.environ.get("TRACED_SERVICE", "app")
provider = TracerProvider(resource=Resource.create({"service.name": service}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
SQLite3Instrumentor().instrument()
tracer = trace.get_tracer("traced_app")
pool = ThreadPoolExecutor(max_workers=4)


def ready() -> str:
    return "ok\n"


def query() -> int:
    db = sqlite3.connect(":memory:")
    try:
        # Through a cursor: the instrumentation traces cursors, not the connection's shortcut.
        cursor = db.cursor()
        sql = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ?) SELECT sum(x) FROM c"
        cursor.execute(sql, (ROWS,))
        (total,) = cursor.fetchone()
        return int(total)
    finally:
        db.close()


def call_svc2() -> str:
    attributes = {"server.address": "svc2", "http.request.method": "GET"}
    with tracer.start_as_current_span(
        "GET /work", kind=trace.SpanKind.CLIENT, attributes=attributes
    ):
        headers: dict[str, str] = {}
        propagate.inject(headers)
        with urllib.request.urlopen(
            urllib.request.Request(f"{SVC2}/work", headers=headers), timeout=10
        ) as r:
            return r.read().decode()


app = Flask("app")
app.add_url_rule("/healthz", view_func=ready)
app.add_url_rule("/items", view_func=lambda: f"{query()}\n")


@app.get("/fanout")
def fanout() -> str:
    if request.args.get("mode") == "par":
        other = pool.submit(contextvars.copy_context().run, call_svc2)
        total = query()
        answer = other.result()
    else:
        total = query()
        answer = call_svc2()
    return f"{total} {answer}"


FlaskInstrumentor().instrument_app(app)

svc2 = Flask("svc2")
svc2.add_url_rule("/healthz", view_func=ready)


@svc2.get("/work")
def work() -> str:
    time.sleep(SVC2_SLEEP_S)
    return "done\n"


FlaskInstrumentor().instrument_app(svc2)
