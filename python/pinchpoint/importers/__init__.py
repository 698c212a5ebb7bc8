"""Turn other load tools' results into pinchpoint run folders.

`import_results(path, fmt, runs_dir)` reads one tool's output and writes
`runs_dir/<run id>/` with:

- `run.json`: `run_id`, `started`, `ended` (unix seconds, null when the source does not
  say), `source: {"tool", "file"}` (file name only; `files` too when several were read),
  `steps` where the source knows its user counts, and `import`: lines read, rows written,
  lines skipped with the first few reasons.
- `requests.parquet` for per-request sources (csv, vegeta, k6), in the documented
  columns: `req_id` in file order, `step` and `users` 0 where unknown, `status` null
  where the source has none, `bytes` null where unknown. k6 adds a `failed` column
  from its `http_req_failed` metric.
- `summary.json` (schema `pinchpoint.summary/1`) for aggregate-only sources (locust,
  wrk2, hdr): the percentiles (`latency_ms`, keys `p50` … `p100`), counts and
  throughput they give, and nothing invented. Locust's per-second history also becomes
  `series.parquet`.

Formats (`FORMATS`): `csv` (timestamp, latency in seconds), `vegeta`, `k6`, `locust`,
`wrk2`, and `hdr` for a bare HdrHistogram percentile table in ms (`hdr:us`, `hdr:ns`,
`hdr:s` for other units). Unreadable input raises ImportFormatError naming the file,
the line and what is wrong; garbage lines in line-based formats are skipped and counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pinchpoint.importers import csv_plain, k6, locust, vegeta, wrk2
from pinchpoint.importers.common import Imported, ImportFormatError, write_run

__all__ = ["FORMATS", "ImportFormatError", "import_results", "read_source"]

FORMATS: dict[str, Callable[[Path], Imported]] = {
    "csv": csv_plain.read,
    "vegeta": vegeta.read,
    "k6": k6.read,
    "locust": locust.read,
    "wrk2": wrk2.read,
    "hdr": lambda path: wrk2.read(path, unit="ms", tool="hdr"),
}


def read_source(path: Path, fmt: str) -> Imported:
    """Read `path` as format `fmt` without writing anything."""
    name, _, unit = fmt.strip().lower().partition(":")
    if name == "hdr" and unit:
        return wrk2.read(Path(path), unit=unit, tool="hdr")
    reader = FORMATS.get(name)
    if reader is None or unit:
        known = ", ".join([*FORMATS, "hdr:<unit>"])
        raise ValueError(f"unknown import format {fmt!r}; known formats: {known}")
    return reader(Path(path))


def import_results(path: Path, fmt: str, runs_dir: Path) -> Path:
    """Import one tool's results as a new run folder under `runs_dir`; return its path."""
    return write_run(read_source(path, fmt), Path(runs_dir))
