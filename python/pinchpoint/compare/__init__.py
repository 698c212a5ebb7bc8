"""`pinchpoint compare A B`: before/after latency of two runs.

Each side is a run folder (its requests.parquet), a requests.parquet file, or a plain
`timestamp, latency` CSV file in seconds (read on the fly). Only successful requests
count: no error, and a 1xx–3xx status or none recorded (k6's `failed` column wins
where present).

`compare()` gives the percentile ladder p50 … p99.99 of both sides with B/A ratios,
each side's share of requests slower than `sla_ms`, percentile-bootstrap 95% intervals
of p50, p99 and p99.9 and whether they overlap, the Mann–Whitney U test, and a verdict
line on p99. With `out`, it also writes a self-contained HTML page there.
`pinchpoint.terminal.comparison.render_comparison()` prints it all with rich.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinchpoint.compare.result import ComparisonResult


def compare(a: Path, b: Path, out: Path | None, sla_ms: float | None) -> ComparisonResult:
    """Compare run (or CSV file) `b` against `a`; write the page to `out` if given.

    Raises CompareInputError when a side cannot be read or has nothing to compare."""
    # Imported here: the package stays light for its tolerances (`compare/tolerances.py`),
    # which the command line reads at start.
    from pinchpoint.compare.html import write_html
    from pinchpoint.compare.result import build
    from pinchpoint.compare.sides import CompareInputError, load_side

    if sla_ms is not None and not sla_ms > 0:
        raise ValueError(f"the SLA must be a positive number of ms, not {sla_ms}")
    side_a, side_b = load_side(Path(a)), load_side(Path(b))
    try:
        result = build(side_a, side_b, sla_ms)
    except ValueError as exc:
        raise CompareInputError(str(exc)) from None
    if out is not None:
        result.html = write_html(result, Path(out))
    return result
