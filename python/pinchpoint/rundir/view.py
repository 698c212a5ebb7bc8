"""`RunView`: the one reader of a run folder. Every stage after the load (the analysis, the
report, compare, the Python API, the commands) reads the folder through it.

Each file is read when first asked for and kept: a JSON file as a dict, the plan as text,
a table whole or as a scan (a query over it reads only the columns it uses). What the
files mean is left to the layers above: the view returns plain data (dicts, Polars
frames), and the requests' digest and the tiers' sample, which are kept or drawn from the
folder's own files. A file that is not there raises FileNotFoundError naming it; one that
cannot be read, ValueError naming it (`RunFolder`'s reads)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinchpoint.rundir import files

if TYPE_CHECKING:
    import polars as pl

    from pinchpoint.rundir.digest import Digest
    from pinchpoint.rundir.scan import Frame
    from pinchpoint.rundir.steady import Window
    from pinchpoint.rundir.tier_sample import TierRecords

# What to do when verdict.json is not there yet.
ANALYZE_FIRST = "run `pinchpoint analyze` on the folder first"


class RunView:
    """One run folder, read on demand. Attributes load their file on first use."""

    def __init__(self, folder: files.RunFolder | str | PathLike[str]) -> None:
        self.folder = (
            folder if isinstance(folder, files.RunFolder) else files.RunFolder(Path(folder))
        )
        self._tables: dict[tuple[str, tuple[str, ...] | None, tuple[str, ...]], pl.DataFrame] = {}
        self._digests: dict[tuple[Any, ...], Digest] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    @property
    def path(self) -> Path:
        return self.folder.path

    def has(self, name: str) -> bool:
        """Whether the file `name` is there."""
        return self.folder.has(name)

    def exists(self, name: str) -> bool:
        """Whether anything is there by that name: a file, a folder (levels/), a link."""
        return (self.folder / name).exists()

    def is_run_folder(self) -> bool:
        """Whether the folder holds any of a run's files (`files.MARKERS`)."""
        return any(self.has(name) for name in files.MARKERS)

    def require(self, name: str, hint: str = "") -> Path:
        """The file's path; FileNotFoundError naming it (and `hint`) when it is not there."""
        path = self.folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found" + (f"; {hint}" if hint else ""))
        return path

    # The JSON files and the plan.

    @cached_property
    def run(self) -> dict[str, Any]:
        """run.json: the steps' windows, the host, the engine's own counts."""
        return dict(self.folder.read_run())

    @cached_property
    def verdict(self) -> dict[str, Any]:
        """verdict.json: the analysis."""
        self.require(files.VERDICT, ANALYZE_FIRST)
        return dict(self.folder.read_verdict())

    @cached_property
    def collection(self) -> dict[str, Any]:
        """collection.json: what collection read of each component's logs."""
        return dict(self.folder.read_collection())

    @cached_property
    def profile(self) -> dict[str, Any] | None:
        """profile.json: the stacks sampled during one step (`run --profile`); None when
        the run took none or it cannot be read."""
        if not self.folder.has(files.PROFILE):
            return None
        try:
            return dict(self.folder.read_json(files.PROFILE))
        except (OSError, ValueError):
            return None

    @cached_property
    def plan_text(self) -> str:
        """plan.toml, as it ran (secrets redacted); a byte that is not UTF-8 replaced."""
        return self.require(files.PLAN).read_text(encoding="utf-8", errors="replace")

    def plan_path(self) -> Path:
        """Where the plan is, for the layers that parse it (and name it in their errors)."""
        return self.folder / files.PLAN

    # The tables.

    def table(
        self, name: str, columns: Sequence[str] | None = None, optional: Sequence[str] = ()
    ) -> pl.DataFrame:
        """A Parquet table of the folder read whole (or `columns`, each required, and those
        of `optional` it has); read once for each set of columns asked."""
        key = (name, None if columns is None else tuple(columns), tuple(optional))
        if key not in self._tables:
            self._tables[key] = self.folder.read_frame(name, columns, optional)
        return self._tables[key]

    def scan(
        self, name: str, columns: Sequence[str] | None = None, optional: Sequence[str] = ()
    ) -> pl.LazyFrame:
        """A Parquet table of the folder unread (see `RunFolder.scan_frame`)."""
        return self.folder.scan_frame(name, columns, optional)

    @property
    def requests(self) -> pl.DataFrame:
        """requests.parquet: one row per request sent, read whole once."""
        return self.table(files.REQUESTS)

    def scan_requests(
        self, columns: Sequence[str] | None = None, optional: Sequence[str] = ()
    ) -> pl.LazyFrame:
        """requests.parquet unread: a query over it reads only the columns it uses, a row
        group at a time with `.collect(engine="streaming")`."""
        return self.scan(files.REQUESTS, columns, optional)

    @property
    def tiers(self) -> pl.DataFrame:
        """tiers.parquet: each tier's log records matched to the run, read whole once."""
        return self.table(files.TIERS)

    @property
    def resources(self) -> pl.DataFrame:
        """resources.parquet: samples of every component, the host and the generator."""
        return self.table(files.RESOURCES)

    # What is drawn from the tables and kept.

    @cached_property
    def tier_sample(self) -> TierRecords:
        """The tiers' records whole, or those of a hashed share of the requests above
        `tier_sample.WHOLE_ROWS` (none without tiers.parquet)."""
        from pinchpoint.rundir.tier_sample import read_tiers

        return read_tiers(self.folder)

    def digest(
        self,
        requests: Frame,
        windows: Sequence[Window],
        over_ms: Sequence[float] = (),
        extent: bool = False,
    ) -> Digest:
        """The digest of `requests` (a scan of requests.parquet) by `windows`: kept in
        digest.parquet while it stands for the requests (`digest_store`), and here once
        computed for the same windows, thresholds and extent."""
        from dataclasses import astuple

        from pinchpoint.rundir.digest_store import folder_digest
        from pinchpoint.rundir.scan import columns

        key = (
            tuple(astuple(w) for w in windows),
            tuple(over_ms),
            extent,
            tuple(columns(requests)),
        )
        if key not in self._digests:
            self._digests[key] = folder_digest(self.folder, requests, windows, over_ms, extent)
        return self._digests[key]


def as_view(folder: RunView | files.RunFolder | str | PathLike[str]) -> RunView:
    """`folder` as a view: itself when it is one already (and what it read is kept)."""
    return folder if isinstance(folder, RunView) else RunView(folder)
