"""The demo app's checkout: one request at a time across the whole app.

`POST /api/checkout?hold=10` takes an exclusive lock on `checkout.lock` beside the
app's database, holds it `hold` ms (asleep, no CPU), and answers `{"held_ms": 10}`.
The lock is a file lock (flock), taken on a file opened anew by each request, so it
serializes the requests of every worker process and every thread alike: however large
the pool, checkouts pass one by one, at most 1000 / hold a second.
"""

from __future__ import annotations

import fcntl
import time
from pathlib import Path

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue

from pinchpoint.demo.query import int_arg

LOCK_FILE = "checkout.lock"
DEFAULT_HOLD_MS = 10
MAX_HOLD_MS = 1000


def hold_lock(path: Path, hold_s: float) -> None:
    """Waits for the exclusive lock on path, then holds it hold_s."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            time.sleep(hold_s)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def register(app: Flask, lock_path: Path) -> None:
    """Adds `POST /api/checkout` to the app, serialized on lock_path."""

    @app.post("/api/checkout")
    def checkout() -> ResponseReturnValue:
        hold = int_arg("hold", DEFAULT_HOLD_MS, 0, MAX_HOLD_MS)
        if hold is None:
            return jsonify(error=f"hold must be an integer 0..{MAX_HOLD_MS} (ms)"), 400
        hold_lock(lock_path, hold / 1000)
        return jsonify(held_ms=hold)
