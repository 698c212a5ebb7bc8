"""A component's log as a set of files: a path or a glob, followed across rotations.

A log is the files its pattern matches and their rotations: the files in the same folder
whose name starts with a matched file's name (`access.log.1`, `access.log-20260101`).
Only those files are ever opened, and any file they were renamed to (found by inode).
A glob's matches and the rotations are never symbolic links, and a glob's matches stay
inside the folder the pattern names before its first wildcard.

`mark_logs` notes, for each of these files, its inode, its size and the bytes just before
its end. `log_sources` then says which files to read, and from where, so that every line
written after the mark is read exactly once:

- a marked file is read from its mark, wherever it now is (renamed files are found by
  inode in their folder);
- a marked file that was truncated (copytruncate) is read from its start, and the copy
  taken before the truncation (a new file of the log holding the marked tail bytes at the
  mark) from the mark;
- a file of the log that did not exist at the mark is read whole, unless it is a plain
  copy of a marked file that was not truncated (read there) or it is compressed.
"""

from __future__ import annotations

import glob
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TAIL_BYTES = 256
_GLOB_CHARS = frozenset("*?[")
# gzip, zstd, bzip2, xz: rotated files compressed since the mark are not text.
_COMPRESSED = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"BZh", b"\xfd7zXZ")


@dataclass(frozen=True)
class FileMark:
    """One file at the mark: where it was, its inode, its size and its last bytes."""

    path: str
    inode: int
    size: int
    tail: bytes

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "inode": self.inode, "size": self.size}


@dataclass(frozen=True)
class LogMark:
    """The files of a log pattern at the mark."""

    pattern: str
    files: tuple[FileMark, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "files": [f.as_dict() for f in self.files]}


@dataclass(frozen=True)
class Source:
    """A file to read from `offset`; `why` says how it relates to the mark."""

    path: str
    offset: int
    why: str  # appended, rotated, truncated, copy, new


def is_glob(pattern: str) -> bool:
    return any(ch in _GLOB_CHARS for ch in pattern)


def log_files(pattern: str) -> list[Path]:
    """The regular files a path or glob names right now, sorted.

    A glob's matches stay inside its folder (the pattern's part before the first wildcard)
    and go through no symbolic link below it: a link planted in a log folder does not take
    the reader anywhere else. A plain path is read as configured, link or not.
    """
    if not is_glob(pattern):
        return [Path(pattern)] if os.path.isfile(pattern) else []
    base = Path(glob_folder(pattern))
    return [Path(name) for name in sorted(glob.glob(pattern)) if _inside(Path(name), base)]


def glob_folder(pattern: str) -> str:
    """The folder a glob's matches must stay in: its part before the first wildcard."""
    first = min(pattern.index(ch) for ch in _GLOB_CHARS if ch in pattern)
    return os.path.dirname(pattern[:first]) or "."


def log_set(pattern: str) -> dict[int, Path]:
    """The files of a log now, by inode: those the pattern matches and their rotations."""
    matched = log_files(pattern)
    found = _inodes(matched)
    names: dict[Path, set[str]] = {}
    for path in matched or ([] if is_glob(pattern) else [Path(pattern)]):
        names.setdefault(path.parent, set()).add(path.name)
    for folder, prefixes in names.items():
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith(tuple(prefixes)) and entry.is_file(
                        follow_symlinks=False
                    ):
                        found.setdefault(entry.inode(), Path(entry.path))
        except OSError:
            continue
    return found


def mark_logs(pattern: str) -> LogMark:
    """The current end of every file of a log."""
    files = []
    for _, path in sorted(log_set(pattern).items(), key=lambda item: str(item[1])):
        found = _mark_file(path)
        if found is not None:
            files.append(found)
    return LogMark(pattern, tuple(files))


def log_sources(pattern: str, mark: LogMark | None) -> list[Source]:
    """Which files to read, and from which byte, to get every line written since `mark`."""
    if mark is None:
        return [Source(str(p), 0, "new") for p in log_files(pattern)]
    current = log_set(pattern)
    marked = {f.inode for f in mark.files}
    sources: list[Source] = []
    used: set[int] = set()
    for fm in mark.files:
        where = current.get(fm.inode) or _find_inode(Path(fm.path).parent, fm.inode)
        if where is None:
            continue  # deleted or moved to another folder: what it held since the mark is lost
        used.add(fm.inode)
        if _holds_tail(where, fm):
            why = "appended" if str(where) == fm.path else "rotated"
            sources.append(Source(str(where), fm.size, why))
            continue
        copy = _find_copy(fm, marked | used, current)
        if copy is not None:
            used.add(copy[0])
            sources.append(Source(str(copy[1]), fm.size, "copy"))
        sources.append(Source(str(where), 0, "truncated"))
    tails = [fm for fm in mark.files if fm.tail]
    for inode, path in sorted(current.items(), key=lambda item: str(item[1])):
        if inode in used or inode in marked:
            continue
        if any(_holds_tail(path, fm) for fm in tails) or _compressed(path):
            continue  # a plain copy of a marked file, read there; or not text
        sources.append(Source(str(path), 0, "new"))
    return sources


def _mark_file(path: Path) -> FileMark | None:
    try:
        with open(path, "rb") as file:
            info = os.fstat(file.fileno())
            start = max(0, info.st_size - TAIL_BYTES)
            tail = os.pread(file.fileno(), info.st_size - start, start)
    except OSError:
        return None
    return FileMark(str(path), info.st_ino, start + len(tail), tail)


def _holds_tail(path: Path, fm: FileMark) -> bool:
    """Whether the file holds fm's tail bytes just before fm's size (so it was not truncated)."""
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size < fm.size:
                return False
            start = fm.size - len(fm.tail)
            return os.pread(file.fileno(), len(fm.tail), start) == fm.tail
    except OSError:
        return False


def _find_copy(
    fm: FileMark, excluded: set[int], current: dict[int, Path]
) -> tuple[int, Path] | None:
    """The copy of fm taken before it was truncated: a new file of the log holding its tail."""
    if not fm.tail:
        return None
    for inode, path in sorted(current.items(), key=lambda item: str(item[1])):
        if inode not in excluded and _holds_tail(path, fm):
            return inode, path
    return None


def _inside(path: Path, base: Path) -> bool:
    """Whether `path` is a regular file below `base`, reached through no symbolic link and
    no `..` (each part below `base` checked as it is on disk, not as it resolves)."""
    parts = path.parts[len(base.parts) :]
    if path.parts[: len(base.parts)] != base.parts or not parts:
        return False
    where = base
    for part in parts:
        if part in (os.curdir, os.pardir):
            return False
        where = where / part
        try:
            mode = os.lstat(where).st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return False
    return stat.S_ISREG(mode)


def _inodes(paths: list[Path]) -> dict[int, Path]:
    found: dict[int, Path] = {}
    for path in paths:
        try:
            found.setdefault(os.stat(path).st_ino, path)
        except OSError:
            continue
    return found


def _find_inode(folder: Path, inode: int) -> Path | None:
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.inode() == inode and entry.is_file(follow_symlinks=False):
                    return Path(entry.path)
    except OSError:
        pass
    return None


def _compressed(path: Path) -> bool:
    try:
        with open(path, "rb") as file:
            head = file.read(6)
    except OSError:
        return True
    return head.startswith(_COMPRESSED)
