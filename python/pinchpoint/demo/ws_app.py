"""The demo app's WebSockets (for its ASGI form, `asgi_app.py`): `/ws/echo` sends each
frame back as it came, text or binary, after `?delay_ms=` of waiting (at most 10 s);
`/ws/chat` greets the connection with `{"type": "welcome", "n": 0}`, then answers each
`{"say": ...}` with `{"said": ..., "n": <its number on the connection>}`."""

from __future__ import annotations

import asyncio
import json

from starlette.websockets import WebSocket, WebSocketDisconnect

MAX_DELAY_MS = 10_000


async def echo(websocket: WebSocket) -> None:
    try:
        delay_ms = min(max(int(websocket.query_params.get("delay_ms", "0")), 0), MAX_DELAY_MS)
    except ValueError:
        await websocket.close(code=1008, reason="delay_ms is a whole number of milliseconds")
        return
    await websocket.accept()
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        if message.get("bytes") is not None:
            await websocket.send_bytes(message["bytes"])
        else:
            await websocket.send_text(message.get("text") or "")


async def chat(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(json.dumps({"type": "welcome", "n": 0}))
    n = 0
    try:
        while True:
            text = await websocket.receive_text()
            n += 1
            try:
                said = json.loads(text).get("say")
            except (ValueError, AttributeError):
                await websocket.send_text(json.dumps({"error": 'send {"say": ...}', "n": n}))
                continue
            await websocket.send_text(json.dumps({"said": said, "n": n}))
    except WebSocketDisconnect:
        return
