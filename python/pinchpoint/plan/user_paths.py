"""The paths a user names, checked before any load: an input (a plan, an agent's config,
a feed, a locustfile, a CA file) is a regular file of bounded size; an output (`--out`, a
report) is a regular file or a new one in a folder that exists and can be written.

A FIFO with no writer blocks `open()` for reading and one with no reader blocks it for
writing; a device reads without end (/dev/zero) or fails every write (/dev/full). So an
input is opened without blocking and checked by its descriptor (what was checked is what
is read), and an output is refused unless it is a regular file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NotUsable", "check_output_file", "not_regular", "open_input", "read_input"]


class NotUsable(ValueError):
    """A path that cannot be read or written as asked; the message names it and why."""


def not_regular(mode: int) -> str | None:
    """What a file of mode `mode` is when it is not a regular file (`a FIFO`), else None."""
    if stat.S_ISREG(mode):
        return None
    kinds = [
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ]
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def open_input(path: Path, max_bytes: int, what: str) -> BinaryIO:
    """`path` open for reading in binary; NotUsable naming it when it cannot be opened,
    is not a regular file or holds more than `max_bytes` (`what` it should be is said)."""
    try:
        # O_NONBLOCK: a FIFO's open returns at once instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise NotUsable(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    try:
        found = os.fstat(fd)
        kind = not_regular(found.st_mode)
        if kind is not None:
            raise NotUsable(f"{path}: {kind}, not a regular file: not read as the {what}")
        if found.st_size > max_bytes:
            raise NotUsable(f"{path}: larger than {_size(max_bytes)}: not read as the {what}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of `path`, checked as `open_input` does; NotUsable when it grew past
    `max_bytes` since."""
    with open_input(path, max_bytes, what) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NotUsable(f"{path}: larger than {_size(max_bytes)}: not read as the {what}")
    return data


def check_output_file(path: Path, flag: str) -> None:
    """`path` can be written by the run: a regular file that can be written, or a new
    file in a folder that exists and can be written. NotUsable names `flag`, the path
    and why."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        _check_new_file(path, flag)
        return
    except OSError as e:
        raise NotUsable(f"{flag} {path}: cannot be checked: {e.strerror or e}") from None
    kind = not_regular(found.st_mode)
    if kind is not None:
        raise NotUsable(f"{flag} {path}: {kind}, not a regular file: nothing is written there")
    if not os.access(path, os.W_OK):
        raise NotUsable(f"{flag} {path}: cannot be written (permission denied)")


def _check_new_file(path: Path, flag: str) -> None:
    folder = path.parent
    if not folder.exists():
        raise NotUsable(f"{flag} {path}: the folder {folder} does not exist")
    if not folder.is_dir():
        raise NotUsable(f"{flag} {path}: {folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise NotUsable(f"{flag} {path}: the folder {folder} cannot be written to")


def _size(max_bytes: int) -> str:
    if max_bytes >= 1 << 20 and max_bytes % (1 << 20) == 0:
        return f"{max_bytes >> 20} MB"
    if max_bytes >= 1 << 10:
        return f"{max_bytes >> 10} KB"
    return f"{max_bytes} bytes"
