"""Which files of a log are read after a mark, and from where."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_helpers import append

from pinchpoint.collect.logs.logset import log_sources, mark_logs
from pinchpoint.collect.logs.reader import read_from


def lines_since(pattern: Path, mark: object) -> list[str]:
    out: list[str] = []
    for source in log_sources(str(pattern), mark):  # type: ignore[arg-type]
        out.extend(read_from(source.path, source.offset))
    return out


def test_a_file_created_after_the_mark_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    mark = mark_logs(str(log))
    append(log, "a\nb\n")
    assert lines_since(log, mark) == ["a", "b"]


def test_a_glob_reads_new_and_grown_files(tmp_path: Path) -> None:
    append(tmp_path / "a.log", "old\n")
    mark = mark_logs(str(tmp_path / "*.log"))
    append(tmp_path / "a.log", "a1\n")
    append(tmp_path / "b.log", "b1\n")
    append(tmp_path / "c.txt", "never\n")
    assert lines_since(tmp_path / "*.log", mark) == ["a1", "b1"]


def test_rotated_just_before_the_mark_the_old_file_still_counts(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(tmp_path / "access.log.1", "before\n")  # renamed; the server has not reopened yet
    mark = mark_logs(str(log))
    append(tmp_path / "access.log.1", "late\n")
    append(log, "new\n")
    assert lines_since(log, mark) == ["late", "new"]


def test_a_plain_copy_is_not_read_twice(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\n")
    mark = mark_logs(str(log))
    append(log, "b\n")
    shutil.copy(log, tmp_path / "access.log.bak")  # copied, not truncated
    append(log, "c\n")
    assert lines_since(log, mark) == ["b", "c"]


def test_copytruncate_regrown_past_the_mark_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "x" * 10 + "\n")
    mark = mark_logs(str(log))
    append(log, "b\n")
    shutil.copy(log, tmp_path / "access.log.1")
    log.write_text("")
    append(log, "".join(f"line {n}\n" for n in range(20)))
    assert lines_since(log, mark) == ["b", *(f"line {n}" for n in range(20))]


def test_files_outside_the_log_are_not_read(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\n")
    mark = mark_logs(str(log))
    append(tmp_path / "other.log", "no\n")
    append(tmp_path / "xaccess.log", "no\n")
    paths = {s.path for s in log_sources(str(log), mark)}
    assert paths == {str(log)}
