"""`POST /control?users=N&by=page|terminal` (closed loop) or `?rate=R` (open loop) on the
live page: a change of the run's users or arrival rate (load/control.py), asked by the
page's control or `pinchpoint control`.

It always needs the run's token, on loopback too: the page's cookie (set by opening the
address the command prints, `?token=`) or `Authorization: Bearer`. A request from
another site's page is refused whatever it holds (its `Origin` is not the page's), and a
refusal never reaches the engine. The answer is JSON: the change asked, or `error`.
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pinchpoint.load.control import ControlError, LiveControl

COOKIE = "pinchpoint_live"


def held_token(headers: Any) -> str:
    """The token a request holds in its `Authorization: Bearer` or its cookie ("" if
    none)."""
    scheme, _, credentials = str(headers.get("Authorization", "")).partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    cookie = SimpleCookie(str(headers.get("Cookie", "")))
    return cookie[COOKIE].value if COOKIE in cookie else ""


def same_token(given: str, expected: str) -> bool:
    """Compared in constant time."""
    return bool(given) and hmac.compare_digest(given.encode(), expected.encode())


def answer(
    control: LiveControl | None, token: str, path: str, headers: Any
) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a control request."""
    if not same_token(held_token(headers), token):
        return 401, {"error": "changing the load needs the run's token (the address printed)"}
    origin = str(headers.get("Origin", ""))
    if origin and urlsplit(origin).netloc != str(headers.get("Host", "")):
        return 403, {"error": f"a page of {origin} cannot change this run"}
    if control is None:
        return 409, {"error": "this run's load cannot be changed"}
    query = parse_qs(urlsplit(path).query)
    by = query.get("by", ["terminal"])[0]
    try:
        if "rate" in query:
            return 200, control.ask_rate(_rate(query["rate"][0]), by)
        return 200, control.ask(_users(query.get("users", [""])[0]), by)
    except ControlError as e:
        return e.status, {"error": str(e)}


def _users(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ControlError(f"users: {raw!r}: a whole number of users") from None


def _rate(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ControlError(f"rate: {raw!r}: a number of requests per second") from None


def body(data: dict[str, Any]) -> bytes:
    return (json.dumps(data) + "\n").encode()
