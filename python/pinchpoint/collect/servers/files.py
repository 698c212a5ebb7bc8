"""Opening a server's config and pid files: with the rights of the process that names them,
and, where an agent's config lists the folders discovery may read, only files whose real
path lies under one of them.

A process owned by another user names files with its own rights: where pinchpoint runs as
root, those files are opened in a child process that has dropped to that owner's uid,
gid and groups, so that a file the owner cannot read (a root-only key, /etc/shadow) stays
unread. Only regular files are read: a FIFO or a device named as a config would block or
never end.

The folder check is made on the file opened (its path as the kernel resolved it), not on
the name asked for, so that a link from an allowed folder to another file is refused too.
"""

from __future__ import annotations

import errno
import glob as globbing
import os
import select
import signal
import stat
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

_ROOTS: ContextVar[tuple[Path, ...] | None] = ContextVar("readable_roots", default=None)


@dataclass(frozen=True)
class Owner:
    """The effective user, group and supplementary groups of a process."""

    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def of_pid(cls, pid: int) -> Owner | None:
        """The process's owner, from /proc/PID/status; None when it is gone or unreadable."""
        try:
            with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            uid = int(fields["Uid"].split()[1])
            gid = int(fields["Gid"].split()[1])
            groups = tuple(int(g) for g in fields.get("Groups", "").split())
        except (OSError, KeyError, ValueError, IndexError):
            return None
        return cls(uid, gid, groups)

    def needs_drop(self) -> bool:
        """Whether this process has rights the owner lacks (it is root, the owner is not)."""
        return os.geteuid() == 0 and self.uid != 0


_OWNER: ContextVar[Owner | None] = ContextVar("acting_owner", default=None)


@contextmanager
def as_owner(owner: Owner | None) -> Iterator[None]:
    """Within the block, files are opened (and programs run) with the owner's rights."""
    token = _OWNER.set(owner)
    try:
        yield
    finally:
        _OWNER.reset(token)


def acting_owner() -> Owner | None:
    """The owner whose rights files are opened with, where this process has more."""
    owner = _OWNER.get()
    return owner if owner is not None and owner.needs_drop() else None


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
    """Up to `limit` + 1 bytes of the regular file; raises OSError (PermissionError outside
    the allowed folders or beyond the acting owner's rights)."""
    if "\0" in str(path):
        raise OSError(errno.EINVAL, "a path holding a NUL byte", str(path))
    if not allowed(path):
        raise _refused(path)
    owner = acting_owner()
    if owner is None:
        real, data = _read_regular(str(path), limit)
    else:
        packed = in_child(owner, lambda: _pack(*_read_regular(str(path), limit)), limit + 8192)
        real, data = _unpack(packed)
    if not allowed(real):
        raise _refused(path)
    return data


def read_text(path: str | Path, limit: int = 4 * 1024 * 1024) -> str:
    """The file's text, undecodable bytes replaced; raises OSError."""
    return read_bytes(path, limit)[:limit].decode("utf-8", errors="replace")


# The most names a glob returns: a pattern over a huge folder still ends.
MOST_GLOBBED = 10_000


def glob(pattern: str) -> list[str]:
    """The paths matching the pattern, sorted, as the acting owner sees them."""
    if "\0" in pattern:
        return []
    owner = acting_owner()
    if owner is None:
        return sorted(globbing.glob(pattern))[:MOST_GLOBBED]
    found = in_child(
        owner,
        lambda: "\0".join(sorted(globbing.glob(pattern))[:MOST_GLOBBED]).encode(
            errors="surrogateescape"
        ),
        MOST_GLOBBED * 4096,
    )
    return [p for p in found.decode(errors="surrogateescape").split("\0") if p]


def regular_files_in(folder: str | Path) -> list[str]:
    """The names of the regular files in the folder (links followed), sorted, as the
    acting owner sees them; raises OSError."""
    if "\0" in str(folder):
        raise OSError(errno.EINVAL, "a path holding a NUL byte", str(folder))

    def names() -> list[str]:
        with os.scandir(folder) as entries:
            found = [e.name for _, e in zip(range(MOST_GLOBBED), entries, strict=False)]
        return sorted(n for n in found if os.path.isfile(os.path.join(folder, n)))

    owner = acting_owner()
    if owner is None:
        return names()
    listed = in_child(
        owner, lambda: "\0".join(names()).encode(errors="surrogateescape"), MOST_GLOBBED * 4096
    )
    return [n for n in listed.decode(errors="surrogateescape").split("\0") if n]


def _read_regular(path: str, limit: int) -> tuple[str, bytes]:
    """The file's real path and up to `limit` + 1 of its bytes; raises OSError for a file
    that is not a regular one."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        real = os.readlink(f"/proc/self/fd/{fd}")
        with os.fdopen(os.dup(fd), "rb") as f:
            return real, f.read(limit + 1)
    finally:
        os.close(fd)


def _pack(real: str, data: bytes) -> bytes:
    name = real.encode(errors="surrogateescape")
    return struct.pack("<I", len(name)) + name + data


def _unpack(packed: bytes) -> tuple[str, bytes]:
    (size,) = struct.unpack_from("<I", packed)
    return packed[4 : 4 + size].decode(errors="surrogateescape"), packed[4 + size :]


_OK, _FAILED = b"\0", b"\1"


def in_child(owner: Owner, work: Callable[[], bytes], most: int) -> bytes:
    """What `work` returns, run in a forked child with the owner's uid, gid and groups (at
    most `most` bytes of it); raises the OSError the child met."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its result reaches the parent by the pipe
        os.close(readable)
        try:
            os.setgroups(list(owner.groups))
            os.setresgid(owner.gid, owner.gid, owner.gid)
            os.setresuid(owner.uid, owner.uid, owner.uid)
            reply = _OK + work()
        except OSError as e:
            reply = _FAILED + struct.pack("<i", e.errno or errno.EIO) + (e.strerror or "").encode()
        except BaseException:
            reply = _FAILED + struct.pack("<i", errno.EIO)
        try:
            with os.fdopen(writable, "wb") as out:
                out.write(reply[: most + 1])
        finally:
            os._exit(0)
    os.close(writable)
    answer: bytes | None = None
    try:
        answer = _read_until(readable, most + 1, time.monotonic() + CHILD_TIMEOUT_S)
    finally:
        os.close(readable)
        if answer is None:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if answer is None:
        raise OSError(errno.ETIMEDOUT, f"no answer in {CHILD_TIMEOUT_S:g} s")
    if answer[:1] == _OK:
        return answer[1:]
    code = struct.unpack_from("<i", answer, 1)[0] if len(answer) >= 5 else errno.EIO
    said = answer[5:].decode(errors="replace") or os.strerror(code)
    raise OSError(code, said)


# A read with the owner's rights that takes longer is abandoned (a file on a hung mount, a
# child of a threaded parent that never runs).
CHILD_TIMEOUT_S = 10.0


def _read_until(fd: int, most: int, deadline: float) -> bytes | None:
    """Up to `most` bytes from the pipe until its end; None when the deadline passes."""
    got = bytearray()
    while len(got) < most:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, min(65536, most - len(got)))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _refused(path: str | Path) -> PermissionError:
    return PermissionError(
        errno.EACCES, "not under the folders the agent's config lets discovery read", str(path)
    )
