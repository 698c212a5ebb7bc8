"""A Flask app instrumented with OpenTelemetry as users instrument theirs: the Flask and
SQLite instrumentations, spans exported over OTLP/HTTP to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
in batches. Each request to /items runs one SQLite query of some CPU work."""

from __future__ import annotations

import os
import sqlite3

from flask import Flask
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.sqlite3 import SQLite3Instrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

ROWS = int(os.environ.get("TRACED_APP_ROWS", "20000"))

provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
SQLite3Instrumentor().instrument()

app = Flask(__name__)
FlaskInstrumentor().instrument_app(app)


@app.get("/")
@app.get("/healthz")
def ready() -> str:
    return "ok\n"


@app.get("/items")
def items() -> str:
    db = sqlite3.connect(":memory:")
    try:
        query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT ?) SELECT sum(x) FROM c"
        # Through a cursor: the instrumentation traces cursors, not the shortcut on the connection.
        cursor = db.cursor()
        cursor.execute(query, (ROWS,))
        (total,) = cursor.fetchone()
    finally:
        db.close()
    return f"{total}\n"
