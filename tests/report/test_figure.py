"""The charts' plain JSON figures: laid out as plotly's own figures would be, written as
plotly writes them into a page, with plotly's template and plotly.js."""

from __future__ import annotations

import json

import numpy as np
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from pinchpoint.report.figure import dumps, secondary_y, subplots
from pinchpoint.report.plotly_files import plotly_js, plotly_white


def test_a_row_of_subplots_is_make_subplots_layout() -> None:
    for cols, spacing in ((1, None), (3, 0.04), (4, None), (7, 0.04)):
        titles = [f"tier {i}" for i in range(cols)]
        ours = subplots(cols, titles, spacing=spacing, shared_y=True).to_json()["layout"]
        kwargs = {} if spacing is None else {"horizontal_spacing": spacing}
        theirs = make_subplots(
            rows=1, cols=cols, shared_yaxes=True, subplot_titles=titles, **kwargs
        ).to_plotly_json()["layout"]
        theirs.pop("template")
        assert ours == theirs


def test_a_secondary_y_axis_is_make_subplots_layout() -> None:
    theirs = make_subplots(specs=[[{"secondary_y": True}]]).to_plotly_json()["layout"]
    theirs.pop("template")
    assert secondary_y().to_json()["layout"] == theirs


def test_json_as_plotly_writes_it_into_a_page() -> None:
    values = np.array([1.5, np.nan, np.inf, 2.0])
    text = dumps({"y": values, "n": np.int64(3), "name": "a</script>b"})
    assert "</" not in text and "<" not in text
    assert json.loads(text) == {"y": [1.5, None, None, 2.0], "n": 3, "name": "a</script>b"}


def test_plotly_files_are_plotlys() -> None:
    import plotly.io as pio

    assert plotly_js() == get_plotlyjs()
    assert plotly_white() == pio.templates["plotly_white"].to_plotly_json()
