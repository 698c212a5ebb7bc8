"""The run folder's file names are spelled in one module, and the folders the stages write
keep the shapes `rundir.shapes` declares."""

from __future__ import annotations

import ast
import json
import stat
from pathlib import Path
from typing import get_type_hints

import pytest

from pinchpoint.rundir import files
from pinchpoint.rundir.shapes import CollectionJson, FindingJson, RunJson, StepWindow, VerdictJson

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "pinchpoint"
RECORDED = Path(__file__).resolve().parents[1] / "data" / "runs"
NAMES = {
    value
    for name, value in vars(files).items()
    if name.isupper() and isinstance(value, str) and name != "LEVELS"
}


def test_no_module_but_rundir_files_spells_a_run_file_name() -> None:
    spelled = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "rundir" / "files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value}")
    assert spelled == []


def _check_shape(value: dict, shape: type, where: str) -> None:
    missing = shape.__required_keys__ - value.keys()  # type: ignore[attr-defined]
    assert missing == set(), f"{where} lacks {sorted(missing)}"
    hints = get_type_hints(shape)
    for key in value.keys() & hints.keys():
        if hints[key] in (int, float, str, bool):
            expected = (int, float) if hints[key] is float else hints[key]
            assert isinstance(value[key], expected), f"{where}: {key} is {value[key]!r}"


@pytest.mark.parametrize("run", sorted(p.name for p in RECORDED.iterdir()))
def test_recorded_runs_have_the_declared_shapes(run: str) -> None:
    folder = files.RunFolder(RECORDED / run)
    record = folder.read_run()
    _check_shape(dict(record), RunJson, f"{run}/run.json")
    assert record["steps"], "a run has steps"
    for window in record["steps"]:
        _check_shape(dict(window), StepWindow, f"{run}/run.json steps")
        assert window["start"] <= window["end"]
    verdict = folder.read_verdict()
    _check_shape(dict(verdict), VerdictJson, f"{run}/verdict.json")
    for finding in verdict.get("findings", []):
        _check_shape(dict(finding), FindingJson, f"{run}/verdict.json findings")
    collection = folder.read_collection()
    _check_shape(dict(collection), CollectionJson, f"{run}/collection.json")
    for name, counts in collection["components"].items():
        assert counts.get("matched", 0) <= counts.get("lines", 0), name


def test_a_written_file_reads_back_and_leaves_no_partial(tmp_path: Path) -> None:
    folder = files.RunFolder(tmp_path)
    run: RunJson = {"run_id": "r1", "started": 1.0, "ended": 2.0, "steps": []}
    folder.write_run(run)
    assert folder.read_run() == run
    assert sorted(p.name for p in tmp_path.iterdir()) == [files.RUN]


def test_files_that_may_hold_secrets_are_written_for_the_owner_only(tmp_path: Path) -> None:
    folder = files.RunFolder(tmp_path)
    plan = folder.write_text(files.PLAN, "[target]\n")
    assert stat.S_IMODE(plan.stat().st_mode) == 0o600


def test_a_damaged_json_file_names_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / files.VERDICT).write_text('{\n  "schema": 1,\n  oops\n}')
    with pytest.raises(ValueError, match=rf"{files.VERDICT}: line 3: not JSON"):
        files.RunFolder(tmp_path).read_verdict()
    (tmp_path / files.RUN).write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not a JSON object"):
        files.RunFolder(tmp_path).read_run()


def test_a_table_is_read_with_its_required_and_present_optional_columns(tmp_path: Path) -> None:
    import polars as pl

    folder = files.RunFolder(tmp_path)
    pl.DataFrame({"step": [0, 1], "latency_us": [5, 7], "status": [200, 500]}).write_parquet(
        tmp_path / files.REQUESTS
    )
    frame = folder.read_frame(files.REQUESTS, ["step", "latency_us"], ["status", "intended_us"])
    assert frame.columns == ["step", "latency_us", "status"]
    assert frame["latency_us"].to_list() == [5, 7]
    with pytest.raises(ValueError, match=rf"{files.REQUESTS}: lacks columns start_us, error"):
        folder.read_frame(files.REQUESTS, ["step", "start_us", "error"])
    with pytest.raises(FileNotFoundError, match=rf"{files.TIERS}: not found"):
        folder.read_frame(files.TIERS)
    (tmp_path / files.RESOURCES).write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(ValueError, match=rf"{files.RESOURCES}: unreadable"):
        folder.read_frame(files.RESOURCES)


def test_a_table_is_scanned_with_the_same_columns_and_checks(tmp_path: Path) -> None:
    import polars as pl

    from pinchpoint.rundir.scan import collect, height

    folder = files.RunFolder(tmp_path)
    pl.DataFrame({"step": [0, 1], "latency_us": [5, 7], "status": [200, 500]}).write_parquet(
        tmp_path / files.REQUESTS
    )
    scan = folder.scan_frame(files.REQUESTS, ["step", "latency_us"], ["status", "intended_us"])
    assert isinstance(scan, pl.LazyFrame)
    assert height(scan) == 2
    assert collect(scan).equals(
        folder.read_frame(files.REQUESTS, ["step", "latency_us"], ["status", "intended_us"])
    )
    # The file and its columns are checked when the scan is made, not when it is read.
    with pytest.raises(ValueError, match=rf"{files.REQUESTS}: lacks columns start_us, error"):
        folder.scan_frame(files.REQUESTS, ["step", "start_us", "error"])
    with pytest.raises(FileNotFoundError, match=rf"{files.TIERS}: not found"):
        folder.scan_frame(files.TIERS)
    (tmp_path / files.RESOURCES).write_bytes(b"PAR1 not a parquet file")
    with pytest.raises(ValueError, match=rf"{files.RESOURCES}: unreadable"):
        folder.scan_frame(files.RESOURCES)
