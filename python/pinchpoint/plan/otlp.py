"""The `[[otlp]]` tables of a plan: where pinchpoint receives spans during a run.

```toml
[[otlp]]
listen = "127.0.0.1:4318"   # OTLP over HTTP: POST /v1/traces, protobuf or JSON
settle = "6s"               # keep receiving this long after the load (exporters batch)
```
"""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from pinchpoint.plan.toml import Duration, Strict

MAX_SETTLE_S = 120.0


class Otlp(Strict):
    listen: str
    settle: Duration = Field(default=6.0, ge=0, le=MAX_SETTLE_S)
    # Spans kept in memory for the run; more are counted and dropped.
    max_spans: int = Field(default=2_000_000, ge=1, le=50_000_000)

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, listen: str) -> str:
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
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)
