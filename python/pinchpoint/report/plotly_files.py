"""What the pages take from the plotly package: plotly.js and the plotly_white template,
read from its package data once, without importing plotly (its Python objects are not
used: the charts are plain JSON, `pinchpoint.report.figure`)."""

from __future__ import annotations

import json
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any


@cache
def _package_data() -> Path:
    """plotly's package_data folder, found without running plotly's `__init__`."""
    spec = find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the plotly package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data"


@cache
def plotly_js() -> str:
    """plotly.js, minified: what `plotly.offline.get_plotlyjs()` returns."""
    return (_package_data() / "plotly.min.js").read_bytes().decode("utf-8")


@cache
def plotly_white() -> dict[str, Any]:
    """The plotly_white template as a layout's `template`: shared, never to be changed."""
    path = _package_data() / "templates" / "plotly_white.json"
    template: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return template
