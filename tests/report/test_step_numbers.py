"""Steps are counted from 0 wherever they are shown, as run.json, requests.parquet,
`--out` and `/metrics` count them: the live view's table, `pinchpoint load`'s table of
steps and an abort's reason name the second step "1"."""

from __future__ import annotations

import io

from rich.console import Console

from pinchpoint.load.abort import Abort
from pinchpoint.report.load_summary import _steps_table
from pinchpoint.terminal.live import LiveView


def _text(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(renderable)
    return out.getvalue()


def test_the_live_view_and_the_summary_count_steps_as_run_json() -> None:
    view = LiveView(None, quiet=True)
    for step, requests in ((0, 100), (1, 250)):
        view({"requests": requests, "errors": 0, "step": step, "users": 2 + step})
    live = _text(view.render())
    assert [line.split()[1] for line in live.splitlines()[1:3]] == ["0", "1"]
    steps = [
        {"step": s, "kind": "users", "level": 2 + s, "requests_per_s": 10.0, "errors": {},
         "statuses": {"200": 10}, "latency_us": None}
        for s in (0, 1)
    ]  # fmt: skip
    table = _text(_steps_table(steps))
    rows = [line.strip("│ ").split()[0] for line in table.splitlines() if "users" in line]
    assert rows == ["0", "1"]
    reason = Abort("p99_ms", 50.0, 80.0, 1, 3.0, "users", 2.0).reason()
    assert " in step 1 (3 users)" in reason
