"""Flask services instrumented as the OpenTelemetry docs show: FlaskInstrumentor on the
app, RequestsInstrumentor for its calls, spans exported over OTLP/HTTP in batches to
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the service named by OTEL_SERVICE_NAME. No call names
its callee: the requests instrumentation names every client span `GET`.

`gateway` serves /both: it calls SVC_A_URL and SVC_B_URL side by side, in two threads, and
answers when both have. `work` serves /work: a sleep of WORK_MS."""

from __future__ import annotations

import contextvars
import os
import time
from concurrent.futures import ThreadPoolExecutor

import requests
from flask import Flask
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

WORK_S = float(os.environ.get("WORK_MS", "10")) / 1000
CALLEES = [os.environ.get("SVC_A_URL", ""), os.environ.get("SVC_B_URL", "")]

provider = TracerProvider(resource=Resource.create())
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
RequestsInstrumentor().instrument()
pool = ThreadPoolExecutor(max_workers=2 * len(CALLEES))


def ready() -> str:
    return "ok\n"


def call(base: str) -> str:
    answer = requests.get(f"{base}/work", timeout=10)
    answer.raise_for_status()
    return answer.text


gateway = Flask("gateway")
gateway.add_url_rule("/healthz", view_func=ready)


@gateway.get("/both")
def both() -> str:
    # Each thread runs in a copy of this one's context: its call is a child of this span.
    calls = [pool.submit(contextvars.copy_context().run, call, base) for base in CALLEES]
    return "".join(c.result() for c in calls)


FlaskInstrumentor().instrument_app(gateway)

work = Flask("work")
work.add_url_rule("/healthz", view_func=ready)


@work.get("/work")
def do_work() -> str:
    time.sleep(WORK_S)
    return "done\n"


FlaskInstrumentor().instrument_app(work)
