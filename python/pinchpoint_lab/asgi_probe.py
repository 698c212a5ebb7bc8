"""A bare ASGI app for the lab's uvicorn stacks: `GET /work?cpu=MS&wait=MS&block=0|1`
computes on the event loop for cpu ms, then waits wait ms: awaited (`block=0`, the loop
serves other requests meanwhile) or in a synchronous call (`block=1`, time.sleep: the
loop serves nothing else until it returns), as an `async def` handler calling a blocking
client does. It logs nothing: the stack's plan knows it by its processes."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qs

_MOST_MS = 1000.0


def _ms(params: dict[str, list[str]], name: str) -> float:
    try:
        return min(_MOST_MS, max(0.0, float(params.get(name, ["0"])[0])))
    except ValueError:
        return 0.0


def _burn(ms: float) -> None:
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    params = parse_qs(scope.get("query_string", b"").decode())
    _burn(_ms(params, "cpu"))
    wait = _ms(params, "wait") / 1000
    if params.get("block", ["0"])[0] == "1":
        time.sleep(wait)
    else:
        await asyncio.sleep(wait)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})
