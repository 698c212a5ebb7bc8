"""Running a server's own binary to read its config (`nginx -V`, `nginx -T`) with no more
rights than the process it inspects: as its owner where that is another user, only a
binary that no one but root can change where it runs as root, with a bare environment,
and reading at most so many bytes of what it prints."""

from __future__ import annotations

import os
import re
import selectors
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pinchpoint.collect.servers.files import acting_owner

# What a binary is given: no variable of pinchpoint's own environment (tokens, keys) reaches
# a program another user may have chosen.
BARE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C"}


class NotRun(Exception):
    """A command that was not run, or ended without an answer; the message says why, in
    pinchpoint's words (never the program's output)."""


@dataclass(frozen=True)
class Ran:
    """A command that ended: its exit status and what it printed."""

    status: int
    stdout: bytes
    stderr: bytes


def trusted_by_root(binary: str) -> str | None:
    """Why root may not run the binary, or None: it and every folder above it must be owned
    by root and writable by no group or other user, or another user could change what
    runs."""
    path = Path(os.path.realpath(binary))
    for part in [path, *path.parents]:
        try:
            info = part.stat()
        except OSError as e:
            return f"{part} cannot be read ({e.strerror})"
        if info.st_uid != 0:
            return f"{part} is not owned by root"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        # In a sticky folder (/tmp) only an entry's owner may rename or remove it.
        if writable and not (part != path and info.st_mode & stat.S_ISVTX):
            return f"{part} is writable by others than root"
    return None


def run(argv: list[str], timeout_s: float, most_bytes: int) -> Ran:
    """Runs argv with the acting owner's rights (see files.as_owner), at most `timeout_s`
    and reading at most `most_bytes` of each output; raises NotRun."""
    owner = acting_owner()
    if owner is None and os.geteuid() == 0 and (why := trusted_by_root(argv[0])):
        raise NotRun(f"not run as root: {why}")
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=BARE_ENV,
            cwd="/",
            process_group=0,
            user=owner.uid if owner else None,
            group=owner.gid if owner else None,
            extra_groups=list(owner.groups) if owner else None,
        )
    except OSError as e:
        raise NotRun(f"could not start ({e.strerror or type(e).__name__})") from None
    try:
        out, err = _read_both(child, timeout_s, most_bytes)
    finally:
        _stop(child)
    return Ran(child.returncode, out, err)


def _read_both(child: subprocess.Popen[bytes], timeout_s: float, most: int) -> tuple[bytes, bytes]:
    assert child.stdout is not None and child.stderr is not None
    got: dict[int, bytearray] = {
        child.stdout.fileno(): bytearray(),
        child.stderr.fileno(): bytearray(),
    }
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        for pipe in (child.stdout, child.stderr):
            selector.register(pipe, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotRun(f"no answer in {timeout_s:g} s")
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                got[key.fd] += chunk
                if len(got[key.fd]) > most:
                    raise NotRun(f"printed more than {most // (1024 * 1024)} MiB")
    child.wait(max(0.1, deadline - time.monotonic()))
    return bytes(got[child.stdout.fileno()]), bytes(got[child.stderr.fileno()])


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        try:
            os.killpg(child.pid, 9)
        except OSError:
            child.kill()
        child.wait()
    for pipe in (child.stdout, child.stderr):
        if pipe is not None:
            pipe.close()


_IN_FILE = re.compile(r" in (/[^\s:]+):(\d+)")
_OPEN_FAILED = re.compile(r'"(/[^"]+)" failed \((\d+): [A-Za-z ]+\)')


def what_failed(said: bytes) -> str:
    """What a server's error message says failed, in pinchpoint's words: the file and line
    it names and the system's reason, never the message itself (it may quote a file the
    caller may not read)."""
    text = said.decode(errors="replace")
    if match := _OPEN_FAILED.search(text):
        return f"{match[1]} could not be opened ({os.strerror(int(match[2]))})"
    if match := _IN_FILE.search(text):
        return f"an error in {match[1]}, line {match[2]}"
    return "an error in its config"
