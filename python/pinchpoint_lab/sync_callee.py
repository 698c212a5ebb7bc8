"""gunicorn alone on 127.0.0.1 running the demo app with sync workers: a service another
app calls over HTTP (the matrix's async_callee_pool class). Its time comes from its
access log, as any gunicorn's.

    with SyncCallee(workdir / "pricing", workers=1) as callee:
        ...  # callee.url; callee.component("pricing") for the plan
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pinchpoint.demo.stack import DemoStack, Front


class SyncCallee(DemoStack):
    """gunicorn's sync workers serving the demo app, with no proxy in front."""

    def __init__(
        self,
        workdir: Path,
        workers: int = 1,
        server_config: Literal["flags", "file"] = "flags",
    ) -> None:
        super().__init__(workdir, workers, server_config=server_config)
        self.url = self.gunicorn_url

    def component(self, name: str) -> dict[str, Any]:
        """The service as a plan names it: its log, its processes, its pool; it calls
        nothing the plan samples."""
        return {**self._server_component(), "name": name, "calls": []}

    def components(self) -> list[dict[str, Any]]:
        return [self.component("gunicorn")]

    def _prepare_fronts(self) -> list[Front]:
        return []
