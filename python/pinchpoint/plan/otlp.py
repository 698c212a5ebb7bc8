"""The `[[otlp]]` tables of a plan: where pinchpoint receives spans during a run.

```toml
[[otlp]]
listen = "127.0.0.1:4318"   # OTLP over HTTP: POST /v1/traces, protobuf or JSON
settle = "6s"               # keep receiving this long after the load (exporters batch)

[[otlp]]
file = "/var/log/otel/spans.json"   # or: the OpenTelemetry Collector's file exporter
```

A `file` is read after the run from where it ended when the run started: one OTLP/JSON
export request a line, as the Collector's `file` exporter writes them. It must be a regular
file (or not exist yet): a FIFO, a device or a folder is refused with the plan.
"""

from __future__ import annotations

import ipaddress
import os

from pydantic import Field, field_validator, model_validator

from pinchpoint.plan.toml import Duration, Strict
from pinchpoint.plan.user_paths import not_regular

MAX_SETTLE_S = 120.0


class Otlp(Strict):
    listen: str | None = None
    file: str | None = None
    settle: Duration = Field(default=6.0, ge=0, le=MAX_SETTLE_S)
    # Spans kept in memory for the run; more are counted and dropped.
    max_spans: int = Field(default=2_000_000, ge=1, le=50_000_000)

    @model_validator(mode="after")
    def _one_source(self) -> Otlp:
        if (self.listen is None) == (self.file is None):
            raise ValueError(
                "set listen (receive OTLP over HTTP) or file (a Collector's file exporter)"
            )
        return self

    @field_validator("file")
    @classmethod
    def _check_file(cls, file: str | None) -> str | None:
        if file is None:
            return None
        try:
            mode = os.stat(file).st_mode
        except (OSError, ValueError):
            return file  # not written yet (or unreadable: said when it is read)
        kind = not_regular(mode)
        if kind is not None:
            raise ValueError(f"{file} is {kind}, not a regular file of OTLP/JSON lines")
        return file

    @property
    def source(self) -> str:
        return f"otlp {self.listen}" if self.listen is not None else f"otlp file {self.file}"

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, listen: str | None) -> str | None:
        if listen is None:
            return None
        host, sep, port = listen.rpartition(":")
        host = host.strip("[]")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{listen!r} is not host:port (127.0.0.1:4318)")
        if host != "localhost":
            try:
                ipaddress.ip_address(host)
            except ValueError:
                raise ValueError(f"{host!r} is not an IP address or localhost") from None
        return listen

    @property
    def address(self) -> tuple[str, int]:
        if self.listen is None:
            raise ValueError("a file source has no address")
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)
