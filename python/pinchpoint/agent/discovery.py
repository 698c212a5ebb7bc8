"""`POST /v1/discover`: the tiers on the agent's host from an address on, for `pinchpoint
init --agent`. Only with `[agent] discover` set, and reading files only under its folders.

Body: {"address": {"host": "10.0.0.5", "port": 8080}, "path": "/orders"}
"""

from __future__ import annotations

import threading
from typing import Any

from pinchpoint.agent.runs import ApiError
from pinchpoint.collect.servers.files import only_under
from pinchpoint.discover.listeners import Sockets
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.walk import Discovery, follow
from pinchpoint.discover.wire import WireError, address_from, to_json

MOST_PATH = 2048
# One walk at a time: each reads every socket of the host and may start a server's binary.
_ONE = threading.Lock()


def discover(roots: list[str] | None, body: dict[str, Any]) -> dict[str, Any]:
    """The discovery from the body's address on; raises ApiError."""
    if roots is None:
        raise ApiError(
            403, "discovery is off: list the folders it may read in the config's [agent] discover"
        )
    try:
        address = address_from(body.get("address"))
    except WireError as e:
        raise ApiError(400, f"address: {e}") from None
    if address.unix is not None:
        raise ApiError(400, "address: a TCP host and port, not a unix socket")
    path = body.get("path", "/")
    if not isinstance(path, str) or not path.startswith("/") or len(path) > MOST_PATH:
        raise ApiError(400, f"path must be a string starting with '/', at most {MOST_PATH} long")
    if not _ONE.acquire(blocking=False):
        raise ApiError(429, "a discovery is running: try again when it ends")
    try:
        with only_under(roots):
            found = Discovery(f"http://{address}{path}")
            follow(found, address, path, READERS, Sockets.read())
    finally:
        _ONE.release()
    return to_json(found)
