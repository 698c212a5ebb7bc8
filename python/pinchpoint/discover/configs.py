"""Reading a server's config files: each read whole up to a size, any failure a sentence."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from pinchpoint.collect.servers import files

# No config file is this big; a bigger one is not a config (or not one worth reading).
MAX_FILE_BYTES = 4 * 1024 * 1024
# Included files followed, at most: a config that includes itself in ways no loop guard
# sees (a glob matching many files, each including the glob) still ends.
MOST_FILES = 1000


class Unreadable(Exception):
    """A config file that cannot be read; the message says which and why."""


def read_text(path: str | Path) -> str:
    """The file's text (undecodable bytes replaced); raises Unreadable."""
    try:
        data = files.read_bytes(path, MAX_FILE_BYTES)
    except OSError as e:
        raise Unreadable(f"cannot read {path}: {e.strerror or type(e).__name__}") from None
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not read")
    return data.decode("utf-8", errors="replace")


def under(base: str | Path, path: str) -> str:
    """`path` as an absolute path, a relative one taken from `base`."""
    return path if os.path.isabs(path) else os.path.join(base, path)


_ANY_HOST = (None, "", "*", "0.0.0.0", "::")


def host_matches(listening: str | None, reached: str | None) -> bool:
    """Whether a socket listening on host `listening` takes a request sent to host
    `reached`: a wildcard takes any; two IP addresses must be the same; a name is not
    resolved, and taken to match."""
    if listening in _ANY_HOST or reached is None:
        return True
    try:
        return ipaddress.ip_address(listening.strip("[]")) == ipaddress.ip_address(reached)
    except ValueError:
        return True


def check_pid_file(path: Path, pid: int) -> str | None:
    """What is wrong with a pid file that should hold pid (first line), or None."""
    try:
        written = files.read_text(path, 4096).strip()
    except OSError as e:
        return f"pid file {path} cannot be read ({e.strerror}): is it the config the server runs?"
    first = written.splitlines()[0] if written else ""
    if first != str(pid):
        return f"pid file {path} holds {first!r}, not the main process's pid {pid}"
    return None
