"""A bare ASGI app for the lab's uvicorn stacks: `GET /work?cpu=MS&wait=MS&block=0|1&call=0|1`
computes on the event loop for cpu ms, then waits wait ms: awaited (`block=0`, the loop
serves other requests meanwhile) or in a synchronous call (`block=1`, time.sleep: the
loop serves nothing else until it returns), as an `async def` handler calling a blocking
client does. With `call=1` it then awaits a GET of the URL in PINCHPOINT_ASGI_CALL_URL (a
callee service, through httpx's AsyncClient: the loop serves others while it waits),
passing the run's tag on in the callee's query as the demo app passes it to its database,
and answers 502 if the callee fails. It logs nothing: the stack's plan knows it by its
processes."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx

from pinchpoint.probe.work import TAG_PARAMS
from pinchpoint_lab.env import ASGI_CALL_ENV

_MOST_MS = 1000.0
CALL_TIMEOUT_S = 30.0
# One client a process, made on its loop at the first call: its connections are reused.
_client: httpx.AsyncClient | None = None


def _ms(params: dict[str, list[str]], name: str) -> float:
    try:
        return min(_MOST_MS, max(0.0, float(params.get(name, ["0"])[0])))
    except ValueError:
        return 0.0


def _burn(ms: float) -> None:
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


def _with_tag(url: str, params: dict[str, list[str]]) -> str:
    """The callee's URL with the request's run tag (pp_run, pp_users, pp_req) added."""
    tag = [(name, value) for name in sorted(TAG_PARAMS) for value in params.get(name, [])[:1]]
    if not tag:
        return url
    return url + ("&" if "?" in url else "?") + urlencode(tag)


async def _call(params: dict[str, list[str]]) -> bool:
    """GETs the callee's URL with the request's tag; whether it answered 2xx."""
    global _client
    url = os.environ.get(ASGI_CALL_ENV)
    if not url:
        return False
    url = _with_tag(url, params)
    if _client is None:
        _client = httpx.AsyncClient(timeout=CALL_TIMEOUT_S)
    try:
        answer = await _client.get(url)
    except httpx.HTTPError:
        return False
    return answer.is_success


async def _lifespan(receive: Any, send: Any) -> None:
    global _client
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    if _client is not None:
        await _client.aclose()
        _client = None
    await send({"type": "lifespan.shutdown.complete"})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
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
    ok = params.get("call", ["0"])[0] != "1" or await _call(params)
    body = b"ok" if ok else b"callee failed"
    await send(
        {
            "type": "http.response.start",
            "status": 200 if ok else 502,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
