"""The process a flow's hook runs in, started by load/hook_box.py: a hook that spins,
exits or kills its process takes this one down, never pinchpoint's.

    python -m pinchpoint.load.hook_child SPEC MEMORY_BYTES

Its memory is capped at MEMORY_BYTES (RLIMIT_DATA) before it loads the hook (load/hooks.py) and says on its channel (its stdout, one JSON object
a line) `{"ready": true}`, or `{"error": "..."}` before exiting 2. Then, for each call
read on its stdin (`{"step", "method", "path", "headers", "body", "vars"}`, the body in
base64), it answers `{"ok": {"method", "path", "headers", "body"}}` with the request as
the hook left it, or `{"error": "...", "type": "ValueError"}` when the hook raised or
left a request of the wrong shape. A call that needs more memory than its cap answers
`{"memory": true}` and the process ends. It ends when its stdin closes.

The hook's prints and reads do not reach the channel: its stdout is the process's
stderr, its stdin /dev/null.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import sys
from typing import IO, Any

from pinchpoint.load.hooks import Hook, load_hook


class ShapeError(TypeError):
    """The hook left a request that is not one: named as the engine named it."""


def _request(message: dict) -> tuple[dict, dict]:
    request = {
        "step": message["step"],
        "method": message["method"],
        "path": message["path"],
        "headers": [(str(n), str(v)) for n, v in message["headers"]],
        "body": base64.b64decode(message["body"]),
    }
    return request, dict(message["vars"])


def _shape(out: Any) -> dict:
    """The request as the engine reads it back, or ShapeError saying what is wrong."""
    if not isinstance(out, dict):
        raise ShapeError(f"the hook returned {type(out).__name__}, not a dict or None")
    for key in ("method", "path", "headers", "body"):
        if key not in out:
            raise ShapeError(f"no {key!r}")
    method, path, headers, body = out["method"], out["path"], out["headers"], out["body"]
    if not isinstance(method, str) or not isinstance(path, str):
        raise ShapeError("method and path must be str")
    pairs = []
    for pair in headers if isinstance(headers, list | tuple) else [None]:
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            raise ShapeError("headers must be a list of (name, value) pairs")
        name, value = pair
        if not isinstance(name, str) or not isinstance(value, str):
            raise ShapeError("header names and values must be str")
        pairs.append([name, value])
    if isinstance(body, str):
        body = body.encode()
    elif isinstance(body, bytes | bytearray | memoryview):
        body = bytes(body)
    else:
        raise ShapeError(f"body must be bytes or str, not {type(body).__name__}")
    return {
        "method": method,
        "path": path,
        "headers": pairs,
        "body": base64.b64encode(body).decode(),
    }


def answer(hook: Hook, message: dict) -> dict:
    """One call of the hook: its request back, or the error it raised."""
    request, values = _request(message)
    try:
        returned = hook(request, values)
        return {"ok": _shape(request if returned is None else returned)}
    except MemoryError:
        raise  # past the process's cap: not the request's error, the hook's
    except Exception as e:  # the user's code: its error is the request's
        return {"error": str(e), "type": type(e).__name__}


def serve(hook: Hook, calls: IO[bytes], channel: IO[str]) -> None:
    for line in calls:
        try:
            reply = answer(hook, json.loads(line))
        except MemoryError:
            # What the hook held is freed with its frame: the answer can be written.
            channel.write(json.dumps({"memory": True}) + "\n")
            channel.flush()
            return
        channel.write(json.dumps(reply) + "\n")
        channel.flush()


def main() -> int:
    # The channel and the calls on descriptors of their own; the hook's print() goes to
    # stderr and its input() reads nothing.
    channel = os.fdopen(os.dup(1), "w")
    calls = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    memory = int(sys.argv[2])
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    try:
        hook = load_hook(sys.argv[1])
    except ValueError as e:
        channel.write(json.dumps({"error": str(e)}) + "\n")
        channel.flush()
        return 2
    channel.write(json.dumps({"ready": True}) + "\n")
    channel.flush()
    serve(hook, calls, channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
