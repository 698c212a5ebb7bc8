import os
import shutil
from pathlib import Path

import pytest

from pinchpoint.collect.logs import reader as logs
from pinchpoint.collect.logs.reader import Position, mark, read_since


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as file:
        file.write(text)


def test_lines_appended_after_the_mark(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\nb\n")
    position = mark(log)
    assert position == Position(os.stat(log).st_ino, 4)
    append(log, "c\nd\r\n")
    assert list(read_since(log, position)) == ["c", "d"]


def test_nothing_appended_gives_no_lines(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\n")
    assert list(read_since(log, mark(log))) == []


def test_no_position_reads_the_whole_file(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\nb")
    assert list(read_since(log, None)) == ["a", "b"]


def test_line_being_written_at_the_mark_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\nhalf")
    position = mark(log)
    append(log, " done\nc\n")
    assert list(read_since(log, position)) == ["c"]


def test_rename_rotation_reads_rest_of_renamed_file_then_new_file(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\n")
    position = mark(log)
    append(log, "b\n")
    log.rename(tmp_path / "access.log.1")
    append(tmp_path / "access.log.1", "c\n")  # the writer still holds the old file
    append(log, "d\ne\n")
    assert list(read_since(log, position)) == ["b", "c", "d", "e"]


def test_rotated_file_gone_reads_the_new_file_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\n")
    position = mark(log)
    append(log, "b\n")
    (tmp_path / "old").mkdir()
    log.rename(tmp_path / "old" / "access.log.1")
    append(log, "d\n")
    assert list(read_since(log, position)) == ["d"]


def test_copytruncate_reads_the_file_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    append(log, "a\nb\n")
    position = mark(log)
    append(log, "c\n")
    shutil.copy(log, tmp_path / "access.log.1")
    with open(log, "r+b") as file:
        file.truncate(0)
    append(log, "d\n")
    assert list(read_since(log, position)) == ["d"]


def test_file_created_after_the_mark_is_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    position = mark(log)
    assert position == Position(None, 0)
    append(log, "a\nb\n")
    assert list(read_since(log, position)) == ["a", "b"]


def test_file_that_never_exists_gives_no_lines(tmp_path: Path) -> None:
    log = tmp_path / "missing.log"
    assert list(read_since(log, mark(log))) == []
    assert list(read_since(log, None)) == []


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    log.write_bytes(b"ok\n\xff\xfe bad\n")
    assert list(read_since(log, None)) == ["ok", "\ufffd\ufffd bad"]


def test_overlong_line_is_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 8)
    log = tmp_path / "access.log"
    log.write_bytes(b"short\n" + b"x" * 30 + b"\nend\n")
    assert list(read_since(log, None)) == ["short", "xxxxxxxx", "end"]
