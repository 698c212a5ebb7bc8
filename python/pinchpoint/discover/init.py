"""The plan for a URL, from the stack serving it on this host."""

from __future__ import annotations

from pathlib import Path

from pinchpoint.discover.plan_text import plan_text
from pinchpoint.discover.readers import READERS
from pinchpoint.discover.walk import Discovery, walk


def init_plan(url: str, method: str = "GET") -> tuple[str, Discovery]:
    """The plan's text for `url` (requested with `method`) and what was found on the way."""
    found = walk(url, READERS, method=method)
    return plan_text(found), found


def write_plan(url: str, out: Path, method: str = "GET") -> Discovery:
    """Writes the plan for `url` to `out` (refusing to overwrite a file); what was found."""
    text, found = init_plan(url, method)
    with out.open("x", encoding="utf-8") as f:
        f.write(text)
    return found
