"""What a test needs from the machine, as the reason it is skipped without it."""

from __future__ import annotations

from pinchpoint.demo import NginxNotFound, find_nginx


def nginx_missing() -> str:
    """Why nginx cannot be started here, "" when it can."""
    try:
        find_nginx()
    except NginxNotFound as e:
        return str(e)
    return ""
