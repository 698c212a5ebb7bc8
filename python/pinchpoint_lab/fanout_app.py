"""Flask services instrumented as OpenTelemetry's docs show: FlaskInstrumentor on the app,
RequestsInstrumentor for its calls, spans exported over OTLP/HTTP in batches to
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, the service named by OTEL_SERVICE_NAME. No call names
its callee: the requests instrumentation names every client span `GET`.

Run under gunicorn, without --preload (each worker starts its own exporter thread):

    PINCHPOINT_FANOUT_CALLEES="http://... http://..." gunicorn 'pinchpoint_lab.fanout_app:gateway()'
    PINCHPOINT_FANOUT_WAIT_MS=10 gunicorn 'pinchpoint_lab.fanout_app:service()'

The gateway's `/fanout` calls every callee's `/work` side by side, each in its own thread,
and answers when all have. A service's `/work` sleeps its wait: its worker waits, and
needs no core.
"""

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

from pinchpoint_lab.env import FANOUT_CALLEES_ENV, FANOUT_PATH, FANOUT_WAIT_ENV

# Calls in flight in one gateway process: every thread of a gthread worker may fan out.
MAX_CALLS = 64
CALL_TIMEOUT_S = 30


def _traced() -> None:
    """The tracer provider exporting over OTLP/HTTP, and every `requests` call traced."""
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    RequestsInstrumentor().instrument()


def _ready() -> str:
    return "ok\n"


def _app(name: str) -> Flask:
    app = Flask(name)
    app.add_url_rule("/healthz", view_func=_ready)
    return app


def _instrumented(app: Flask) -> Flask:
    FlaskInstrumentor().instrument_app(app)  # type: ignore[no-untyped-call]
    return app


def _call(base: str) -> str:
    answer = requests.get(f"{base}/work", timeout=CALL_TIMEOUT_S)
    answer.raise_for_status()
    return answer.text


def gateway() -> Flask:
    """The app calling every callee's URL side by side."""
    _traced()
    callees = os.environ.get(FANOUT_CALLEES_ENV, "").split()
    pool = ThreadPoolExecutor(max_workers=MAX_CALLS)
    app = _app("gateway")

    def fan_out() -> str:
        # Each thread runs in a copy of this one's context: its call is a child of this span.
        calls = [pool.submit(contextvars.copy_context().run, _call, base) for base in callees]
        return "".join(c.result() for c in calls)

    app.add_url_rule(FANOUT_PATH, view_func=fan_out)
    return _instrumented(app)


def service() -> Flask:
    """The app whose `/work` sleeps its wait."""
    _traced()
    wait_s = float(os.environ.get(FANOUT_WAIT_ENV, "10")) / 1000
    app = _app("service")

    def work() -> str:
        time.sleep(wait_s)
        return "done\n"

    app.add_url_rule("/work", view_func=work)
    return _instrumented(app)
