"""Which processes of a component py-spy samples: the topmost of its processes that run
Python (a gunicorn or uWSGI master, a lone server), each sampled with its children."""

from __future__ import annotations

import os
from pathlib import Path

from pinchpoint.collect.resources.procs import PROC, ProcStat, scan
from pinchpoint.collect.resources.sampler import ProcessSelector

# Executables that run Python code py-spy can read: the interpreters, and uWSGI's
# embedded one.
_PYTHON_NAMES = ("python", "pypy", "uwsgi")


def runs_python(pid: int, proc: Path = PROC) -> bool:
    """Whether process `pid` runs a Python interpreter: its executable is one, or it has
    libpython mapped (an embedding server)."""
    if _program(pid, proc).startswith(_PYTHON_NAMES):
        return True
    try:
        with open(proc / str(pid) / "maps", encoding="utf-8", errors="replace") as maps:
            return any("libpython" in line for line in maps)
    except OSError:
        return False


def _program(pid: int, proc: Path) -> str:
    """The file name of the process's executable; of its first argument when the
    executable cannot be read (another user's process)."""
    try:
        return os.path.basename(os.readlink(proc / str(pid) / "exe"))
    except OSError:
        pass
    try:
        argv0 = (proc / str(pid) / "cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return ""
    return os.path.basename(argv0.decode(errors="replace"))


def python_roots(selector: ProcessSelector, table: dict[int, ProcStat] | None = None) -> list[int]:
    """The selected processes that run Python and whose parent is not one of them, lowest
    pid first: sampling each with its subprocesses covers every worker once."""
    table = scan() if table is None else table
    selected = set(selector.select(table))
    python = {pid for pid in selected if runs_python(pid)}
    return sorted(pid for pid in python if pid in table and table[pid].ppid not in python)
