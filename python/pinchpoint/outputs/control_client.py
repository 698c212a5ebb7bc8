"""`pinchpoint control URL --users N` or `--rate R`: asks a run served with `--serve` to
change its users or its arrival rate (outputs/live_control.py), with the token of the
address the run printed."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx

TIMEOUT_S = 10.0


class ControlRefused(Exception):
    """The run refused the change, or could not be reached: says why."""


def ask_users(url: str, users: int, token: str | None = None) -> dict[str, Any]:
    """Asks the run whose live page is at `url` (the address it printed, `?token=`
    included, or `token`) for `users` users from now on; the change as the run took it."""
    return ask(url, {"users": users}, token)


def ask_rate(url: str, rate: float, token: str | None = None) -> dict[str, Any]:
    """As `ask_users`, for an open-loop run: `rate` arrivals per second from now on."""
    return ask(url, {"rate": rate}, token)


def ask(url: str, change: dict[str, int | float], token: str | None = None) -> dict[str, Any]:
    """Posts `change` (`users` or `rate`) to the run's /control; the change as it took it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ControlRefused(f"{url}: not the http:// address a run printed for its live page")
    token = token or parse_qs(parts.query).get("token", [""])[0]
    if not token:
        raise ControlRefused(f"{url}: no ?token= in the address, and no --token given")
    endpoint = urlunsplit((parts.scheme, parts.netloc, "/control", "", ""))
    try:
        response = httpx.post(
            endpoint,
            params={**change, "by": "terminal"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=TIMEOUT_S,
        )
    except httpx.HTTPError as e:
        raise ControlRefused(f"{endpoint}: {e}") from None
    try:
        data = response.json()
    except ValueError:
        data = {"error": response.text.strip() or f"HTTP {response.status_code}"}
    if response.status_code != 200:
        raise ControlRefused(f"{endpoint}: {response.status_code}: {data.get('error', data)}")
    return dict(data)
