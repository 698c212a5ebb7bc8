"""The files of a run folder, named once, and read and written through `RunFolder`.

runs/<run-id>/
    plan.toml           the plan as run (secrets redacted)
    requests.arrows     the engine's records as they stream (gone once converted)
    requests.parquet    one row per request: step, users, times, status, error
    histograms.json     the engine's per-step HdrHistograms
    resources.parquet   resource samples of every component, the host, the generator
    tiers.parquet       the tiers' log records of the run
    collection.json     what collection read: lines matched and rejected per file
    run.json            the steps' windows, the host, the engine's counts
    verdict.json        the analysis
    digest.parquet      the requests summed per step, endpoint and latency bucket, for
                        the report (stands for requests.parquet while that is unchanged)
    report.html         the page
    summary.json        a summary that stands in for requests.parquet (imports, `load`)
    profile.json        the Python tiers' stacks sampled during one step (`run --profile`)
    db_activity.parquet the database's backends sampled from inside: their state, wait,
                        statement, and the lock and statement that block them
    db_statements.parquet  pg_stat_statements read as the run went, where installed
                        (MySQL: performance_schema's statement digests)
    redis_info.parquet  a Redis component's INFO (CPU, clients) sampled from inside
    redis_commands.parquet  its INFO commandstats: calls and time per command
    redis_slowlog.parquet   its SLOWLOG entries of the run
    advice_check.json   this run against the prediction of an earlier run's advice
                        (`run --check-advice`)
    levels/             the knee search's probes, one run folder each
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pinchpoint.rundir.shapes import CollectionJson, RunJson, VerdictJson

if TYPE_CHECKING:
    import polars as pl

PLAN = "plan.toml"
REQUEST_STREAM = "requests.arrows"
REQUESTS = "requests.parquet"
HISTOGRAMS = "histograms.json"
RESOURCES = "resources.parquet"
TIERS = "tiers.parquet"
COLLECTION = "collection.json"
RUN = "run.json"
VERDICT = "verdict.json"
DIGEST = "digest.parquet"
REPORT = "report.html"
SUMMARY = "summary.json"
PROFILE = "profile.json"
DB_ACTIVITY = "db_activity.parquet"
DB_STATEMENTS = "db_statements.parquet"
REDIS_INFO = "redis_info.parquet"
REDIS_COMMANDS = "redis_commands.parquet"
REDIS_SLOWLOG = "redis_slowlog.parquet"
ADVICE_CHECK = "advice_check.json"
LEVELS = "levels"

# Rows per row group of requests.parquet (the engine's too: ROW_GROUP_ROWS in
# crates/pinchpoint-engine/src/arrow_io.rs): a scan decodes one at a time.
REQUESTS_ROW_GROUP = 128 * 1024

# A run folder's JSON files hold tens of kilobytes nested eight levels deep: a file past
# these bounds is damaged or hostile, refused before it costs the reader its memory or stack.
JSON_MAX_BYTES = 64 * 1024 * 1024
JSON_MAX_DEPTH = 64

# Any one of these makes a folder a run folder (a killed run may have only the stream).
MARKERS = (RUN, PLAN, REQUESTS, REQUEST_STREAM, VERDICT)
# Files that may hold what a user wrote in secret (tokens in the plan, headers in records).
PRIVATE = (PLAN, REQUEST_STREAM, REQUESTS)


class RunFolder:
    """One run folder. Reads raise OSError or ValueError naming the file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def has(self, name: str) -> bool:
        return (self.path / name).is_file()

    def read_text(self, name: str) -> str:
        return (self.path / name).read_text(encoding="utf-8")

    def stamp(self, name: str) -> dict[str, int] | None:
        """What tells one version of a file from another (size, modification time);
        None when it is not there."""
        try:
            st = (self.path / name).stat()
        except OSError:
            return None
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def write_derived(self, name: str, frame: pl.DataFrame, key: dict[str, Any]) -> Path:
        """Writes a table computed from the folder's files, with `key` (JSON) saying from
        what; a reader of it checks the key (`read_derived`)."""
        partial = self.path / f".{name}.partial"
        try:
            frame.write_parquet(partial, metadata={"pinchpoint": json.dumps(key)})
            os.replace(partial, self.path / name)
        except OSError:
            partial.unlink(missing_ok=True)
            raise
        return self.path / name

    def read_derived(self, name: str) -> tuple[pl.DataFrame, dict[str, Any]] | None:
        """A table `write_derived` wrote and its key; None when it is not there or cannot
        be read (it is computed again then)."""
        import polars as pl

        path = self.path / name
        try:
            key = json.loads(pl.read_parquet_metadata(path)["pinchpoint"])
            frame = pl.read_parquet(path)
        except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
            return None
        return (frame, key) if isinstance(key, dict) else None

    def write_text(self, name: str, text: str, private: bool = False) -> Path:
        """Write through a temporary file and rename, so a reader never sees half a file."""
        target = self.path / name
        partial = target.with_name(f".{name}.partial")
        partial.write_text(text, encoding="utf-8")
        if private or name in PRIVATE:
            partial.chmod(0o600)
        os.replace(partial, target)
        return target

    def read_frame(
        self, name: str, columns: Sequence[str] | None = None, optional: Sequence[str] = ()
    ) -> pl.DataFrame:
        """A Parquet table of the folder: all its columns, or `columns` (each required) and
        those of `optional` it has. Raises FileNotFoundError, or ValueError naming the file
        and the columns it lacks or why it cannot be read."""
        import polars as pl

        path = self.path / name
        wanted = self._columns(name, columns, optional)
        try:
            return pl.read_parquet(path, columns=wanted)
        except Exception as exc:
            raise ValueError(f"{path}: unreadable: {exc}") from exc

    def scan_frame(
        self, name: str, columns: Sequence[str] | None = None, optional: Sequence[str] = ()
    ) -> pl.LazyFrame:
        """The table as `read_frame` names it, unread: a query over it reads the columns it
        uses, a row group at a time (collect it with `rundir.scan.collect`). The file and
        its columns are checked now, as by `read_frame`."""
        import polars as pl

        wanted = self._columns(name, columns, optional)
        scan = pl.scan_parquet(self.path / name)
        return scan if wanted is None else scan.select(wanted)

    def _columns(
        self, name: str, columns: Sequence[str] | None, optional: Sequence[str]
    ) -> list[str] | None:
        """The columns to read of the table (None: all), checked against its schema."""
        import polars as pl

        path = self.path / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found")
        try:
            schema = pl.read_parquet_schema(path)
        except Exception as exc:  # polars raises its own errors for a damaged file
            raise ValueError(f"{path}: unreadable: {exc}") from exc
        if columns is None:
            return None
        missing = [c for c in columns if c not in schema]
        if missing:
            raise ValueError(f"{path}: lacks columns {', '.join(missing)}")
        return [*columns, *(c for c in optional if c in schema and c not in columns)]

    def read_json(self, name: str) -> dict[str, Any]:
        """A JSON object of the folder. Raises FileNotFoundError, or ValueError naming the
        file when it is larger than `JSON_MAX_BYTES` (refused unread), nested deeper than
        `JSON_MAX_DEPTH`, not UTF-8, not JSON or not an object."""
        path = self.path / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found")
        try:
            text = _bounded_bytes(path, JSON_MAX_BYTES).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text") from exc
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not JSON: {exc.msg}") from exc
        except RecursionError:
            raise ValueError(f"{path}: nested deeper than {JSON_MAX_DEPTH} levels") from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise ValueError(f"{path}: not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise ValueError(f"{path}: not a JSON object")
        if _depth_over(value, JSON_MAX_DEPTH):
            raise ValueError(f"{path}: nested deeper than {JSON_MAX_DEPTH} levels")
        return value

    def write_json(self, name: str, value: object) -> Path:
        return self.write_text(name, json.dumps(value, indent=2))

    def read_run(self) -> RunJson:
        return cast(RunJson, self.read_json(RUN))

    def write_run(self, run: RunJson) -> Path:
        return self.write_json(RUN, run)

    def read_verdict(self) -> VerdictJson:
        return cast(VerdictJson, self.read_json(VERDICT))

    def write_verdict(self, verdict: VerdictJson) -> Path:
        return self.write_json(VERDICT, verdict)

    def read_collection(self) -> CollectionJson:
        return cast(CollectionJson, self.read_json(COLLECTION))

    def write_collection(self, collection: CollectionJson) -> Path:
        return self.write_json(COLLECTION, collection)


def _bounded_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes; ValueError naming it, having read at most `limit` + 1 bytes, when
    it holds more than `limit`."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise ValueError(
            f"{path}: {max(size, len(data))} bytes, more than the {limit} a run folder's "
            "JSON file may hold"
        )
    return data


def _depth_over(value: object, limit: int) -> bool:
    """Whether lists and objects nest in `value` more than `limit` levels deep."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in item)
    return False
