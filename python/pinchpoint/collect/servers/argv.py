"""Options read from a command line the way servers parse them: `--name value`,
`--name=value`, `-x value` and `-xvalue`; the last one given wins."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def option(argv: Sequence[str], long: Sequence[str], short: Sequence[str] = ()) -> str | None:
    """The value of the last of these options on the command line; None when absent."""
    found = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and name in long:
            if eq:
                found = value
            elif i + 1 < len(argv):
                found = argv[i + 1]
                i += 1
        elif not arg.startswith("--") and arg[:2] in short:
            if len(arg) > 2:
                found = arg[2:].removeprefix("=")
            elif i + 1 < len(argv):
                found = argv[i + 1]
                i += 1
        i += 1
    return found


def flag(argv: Sequence[str], long: Sequence[str], short: Sequence[str] = ()) -> bool:
    """Whether one of these switches is on the command line."""
    return any(arg in long or arg in short for arg in argv)


def split(text: str) -> list[str]:
    """A command line held in one string (GUNICORN_CMD_ARGS), split as a shell would; []
    when its quoting is broken."""
    try:
        return shlex.split(text)
    except ValueError:
        return []


def count(value: str | None, cores: int) -> int | None:
    """A positive count from a config's text; uWSGI's `%k` is the host's cores."""
    if value is None:
        return None
    text = value.strip().strip("\"'").replace("%k", str(cores))
    try:
        number = int(text)
    except ValueError:
        return None
    return number if number > 0 else None


def runs(argv: Sequence[str], program: str) -> bool:
    """Whether the command line runs `program`: as its script (`/venv/bin/uvicorn`), as an
    interpreter's module (`python -m uvicorn`) or script, among its first three words."""
    heads = [a.rsplit("/", 1)[-1] for a in argv[:3]]
    return any(h == program or h.startswith(f"{program}:") for h in heads)
