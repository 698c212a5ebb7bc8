"""Opening a server's config and pid files: any file, or, where an agent's config lists the
folders discovery may read, only files whose real path lies under one of them.

The check is made on the file opened (its path as the kernel resolved it), not on the name
asked for, so that a link from an allowed folder to another file is refused too.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

_ROOTS: ContextVar[tuple[Path, ...] | None] = ContextVar("readable_roots", default=None)


@contextmanager
def only_under(roots: list[str] | tuple[str, ...]) -> Iterator[None]:
    """Within the block, files are opened only under these folders (or these files)."""
    token = _ROOTS.set(tuple(Path(os.path.realpath(r)) for r in roots))
    try:
        yield
    finally:
        _ROOTS.reset(token)


def confined() -> bool:
    """Whether reads are confined to listed folders (an agent's discovery)."""
    return _ROOTS.get() is not None


def allowed(path: str | Path) -> bool:
    """Whether a file at this real path may be read."""
    roots = _ROOTS.get()
    if roots is None:
        return True
    real = Path(os.path.realpath(path))
    return any(real == root or root in real.parents for root in roots)


def read_bytes(path: str | Path, limit: int) -> bytes:
    """Up to `limit` + 1 bytes of the file; raises OSError (PermissionError outside the
    allowed folders)."""
    if not allowed(path):
        raise _refused(path)
    with open(path, "rb") as f:
        if _ROOTS.get() is not None and not allowed(f"/proc/self/fd/{f.fileno()}"):
            raise _refused(path)
        return f.read(limit + 1)


def read_text(path: str | Path, limit: int = 4 * 1024 * 1024) -> str:
    """The file's text, undecodable bytes replaced; raises OSError."""
    return read_bytes(path, limit)[:limit].decode("utf-8", errors="replace")


def _refused(path: str | Path) -> PermissionError:
    return PermissionError(
        errno.EACCES, "not under the folders the agent's config lets discovery read", str(path)
    )
