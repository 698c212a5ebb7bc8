"""The demo app's query arguments."""

from __future__ import annotations

from flask import request


def int_arg(
    name: str, default: int, least: int | None = None, most: int | None = None
) -> int | None:
    """The query argument as an int, `default` when absent; None when it is not an integer or
    lies outside least..most."""
    text = request.args.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        return None
    if (least is not None and value < least) or (most is not None and value > most):
        return None
    return value
