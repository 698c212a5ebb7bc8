"""Stacks of apps traced with OpenTelemetry, exporting their spans to an OTLP endpoint
(a run's `[[otlp]]` receiver): a proxy → gunicorn running a traced app (TracedStack), and
gunicorn alone running a service that app calls (TracedService).

    with TracedService(workdir / "b", endpoint, "pricing", SERVICE_APP, workers=1) as b:
        with TracedStack(workdir / "gw", endpoint, "gateway", GATEWAY_APP,
                         env={FANOUT_CALLEES_ENV: b.url}) as stack:
            ...  # load stack.url; stack.components() + [b.component()] for the plan

The app is named on gunicorn's command line (`module:app`); `pythonpath` adds folders to
import it from. Each is named by OTEL_SERVICE_NAME, as OpenTelemetry's docs set it.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pinchpoint.demo.errors import StackError
from pinchpoint.demo.gunicorn import slots
from pinchpoint.demo.stack import HOST, DemoStack, Front
from pinchpoint_lab.apps import own_app
from pinchpoint_lab.ports import free_port

GATEWAY_APP = "pinchpoint_lab.fanout_app:gateway()"
SERVICE_APP = "pinchpoint_lab.fanout_app:service()"
# The batch span processor's delay, in ms: spans reach the receiver soon after their request.
EXPORT_DELAY_MS = 200
_NEEDS = (
    "opentelemetry.sdk",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.instrumentation.flask",
    "opentelemetry.instrumentation.requests",
    "requests",
)


def otlp_listen() -> str:
    """A free address on 127.0.0.1 for a run's OTLP receiver (the plan's `listen`)."""
    return f"{HOST}:{free_port()}"


def otlp_endpoint(listen: str) -> str:
    """The traces endpoint of an OTLP receiver listening on `listen`, for exporters."""
    return f"http://{listen}/v1/traces"


class TracedStack(DemoStack):
    """A proxy → gunicorn running the traced app `app` as service `service`, exporting its
    spans to `endpoint`. The plan's components: the proxy, gunicorn, and the service,
    whose records come from its spans."""

    def __init__(
        self,
        workdir: Path,
        endpoint: str,
        service: str,
        app: str,
        workers: int = 2,
        *,
        env: Mapping[str, str] | None = None,
        pythonpath: Sequence[Path] = (),
        worker_class: str = "sync",
        threads: int = 1,
        front: str = "nginx",
        server_config: Literal["flags", "file"] = "flags",
    ) -> None:
        super().__init__(
            workdir,
            workers,
            app_env=env,
            worker_class=worker_class,
            threads=threads,
            front=front,
            server_config=server_config,
        )
        self.endpoint = endpoint
        self.service = service
        self.app = app
        self.pythonpath = [Path(p) for p in pythonpath]

    def components(self) -> list[dict[str, Any]]:
        server = self._server_component()
        service = {"name": self.service, "role": "app"}
        return [*self._front_components(server["name"]), server, service]

    def _server_component(self) -> dict[str, Any]:
        return {**super()._server_component(), "calls": [self.service]}

    def _check_server(self) -> None:
        super()._check_server()
        missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
        if missing:
            raise StackError(
                f"a traced stack needs {' and '.join(missing)}: pip install "
                "opentelemetry-sdk opentelemetry-exporter-otlp-proto-http "
                "opentelemetry-instrumentation-flask opentelemetry-instrumentation-requests"
            )

    def _server_argv(self) -> list[str]:
        return own_app(self._gunicorn_argv(), self.app)

    def _server_env(self) -> dict[str, str]:
        env = self._app_env()
        env["PYTHONPATH"] = os.pathsep.join([*map(str, self.pythonpath), env["PYTHONPATH"]])
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = self.endpoint
        env["OTEL_BSP_SCHEDULE_DELAY"] = str(EXPORT_DELAY_MS)
        env["OTEL_SERVICE_NAME"] = self.service
        return env


class TracedService(TracedStack):
    """gunicorn alone on 127.0.0.1 running the traced app `app` as service `service`: the
    callee of another. `url` is gunicorn's."""

    def __init__(
        self,
        workdir: Path,
        endpoint: str,
        service: str,
        app: str,
        workers: int = 1,
        **options: Any,
    ) -> None:
        super().__init__(workdir, endpoint, service, app, workers, **options)
        self.url = self.gunicorn_url

    def component(self, sampled: bool = True) -> dict[str, Any]:
        """The service as the plan gives it: its pool's size, and its processes when
        `sampled`; its records come from its spans either way."""
        pool = slots(self.worker_class, self.workers, self.threads)
        process = {"process": {"pid_file": str(self.gunicorn_pid_file)}} if sampled else {}
        return {"name": self.service, "role": "app_server", "workers": pool, **process}

    def components(self) -> list[dict[str, Any]]:
        return [self.component()]

    def _prepare_fronts(self) -> list[Front]:
        return []
