"""The `[output]` table of a plan: what a run serves while it goes, as the command's
`--metrics` and `--serve` say (a flag given on the command line wins).

```toml
[output]
metrics = "127.0.0.1:9464"   # OpenMetrics on /metrics for Prometheus
serve = "127.0.0.1:8089"     # the live page, then the report
```
"""

from __future__ import annotations

from pydantic import field_validator

from pinchpoint.plan.toml import FieldError, Strict


def parse_address(address: str) -> tuple[str, int]:
    """HOST:PORT (or [IPv6]:PORT) as the host and port to listen on."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("expected HOST:PORT")
    return host.removeprefix("[").removesuffix("]"), int(port)


class Output(Strict):
    metrics: str | None = None
    serve: str | None = None

    @field_validator("metrics", "serve")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_address(value)
            except ValueError as e:
                raise FieldError((), f"{value!r}: {e}") from None
        return value
