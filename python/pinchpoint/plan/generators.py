"""The `[generators]` table of a plan: load generators on a Ray cluster instead of this
process alone.

```toml
[generators]
ray = "auto"     # the cluster this host is part of; or "ray://head:10001", "head:6379"
count = 4        # generators (Ray actors); default one per alive node with CPUs
```

Each generator runs the engine with its share of the users (closed loop) or of the
arrival rate (open loop); the run folder holds all their requests and one verdict
(load/distributed/).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from pinchpoint.plan.toml import FieldError, Strict

# Request ids: generator i takes i << 40 on; far more generators than any cluster runs.
MAX_GENERATORS = 1024
_ADDRESS = re.compile(r"^(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?$")


class Generators(Strict):
    # "auto" (RAY_ADDRESS, or the cluster this host runs), or a cluster's address.
    ray: str | None = None
    count: int | None = Field(default=None, ge=1, le=MAX_GENERATORS)

    @field_validator("ray")
    @classmethod
    def _check_address(cls, address: str | None) -> str | None:
        if address is None or address == "auto":
            return address
        m = _ADDRESS.match(address)
        if m is None or (m.group(3) is not None and not 0 < int(m.group(3)[1:]) < 65536):
            raise ValueError(
                f'{address!r} is not a Ray address: "auto", "ray://head:10001" or "head:6379"'
            )
        return address

    @model_validator(mode="after")
    def _count_needs_ray(self) -> Generators:
        if self.count is not None and self.ray is None:
            raise FieldError("count", 'count needs ray = "auto" or a Ray address')
        return self
