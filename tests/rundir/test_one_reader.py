"""One class reads a run folder: `rundir.view.RunView`. The analysis, the report, compare,
the Python API and the commands take what they need from it; outside `rundir/` the folder's
files are written (`RunFolder.write_*`), never read around the view."""

from __future__ import annotations

import ast
from pathlib import Path

from pinchpoint.api import Run
from pinchpoint.rundir.view import RunView

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "pinchpoint"

# RunFolder's reads, for the view alone.
READS = {
    "read_json",
    "read_run",
    "read_verdict",
    "read_collection",
    "read_frame",
    "scan_frame",
    "read_derived",
}
# Parquet read straight from a path.
PARQUET_READS = {("pl", "read_parquet"), ("pl", "scan_parquet"), ("pq", "read_table")}
# The stages after the load, which read a finished run folder.
READERS = ("analyze", "report", "compare", "cli", "api.py", "terminal/")
# Where a RunFolder is made outside rundir/: the stages that write the folder's files.
WRITERS = {"collect/gather.py", "pipeline/__init__.py"}


def _sources() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text(encoding="utf-8"))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] != "rundir"
    }


def _calls(tree: ast.Module) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def test_no_class_outside_the_view_reads_the_folder() -> None:
    classes = {
        (where, node.name)
        for where, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "RunData"
    }
    assert classes == set()
    assert issubclass(Run, RunView)  # the API's run is the view, with the SLA on top


def test_outside_rundir_the_folder_is_only_written() -> None:
    reads = set()
    made = set()
    for where, tree in _sources().items():
        for call in _calls(tree):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in READS:
                reads.add((where, func.attr))
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "RunFolder":
                made.add(where)
    assert reads == set()
    assert made <= WRITERS


def test_the_readers_read_parquet_through_the_view() -> None:
    straight = set()
    for where, tree in _sources().items():
        if not where.startswith(READERS):
            continue
        for call in _calls(tree):
            func = call.func
            if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
                continue
            if (func.value.id, func.attr) in PARQUET_READS:
                straight.add((where, func.attr))
    assert straight == set()


def test_the_view_reads_each_file_once(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"run_id": "r", "started": 0, "ended": 1, "steps": []}')
    view = RunView(tmp_path)
    assert view.run["run_id"] == "r"
    (tmp_path / "run.json").write_text("not JSON")
    assert view.run["run_id"] == "r"  # kept from the first read
    assert RunView(tmp_path).has("run.json")
