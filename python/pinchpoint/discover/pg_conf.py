"""PostgreSQL's settings as the server reads them: its config file (`config_file` on the
command line, else `postgresql.conf` in the folder of `-D`) with its `include`,
`include_if_exists` and `include_dir` files, then `postgresql.auto.conf` in the data
directory (`data_directory`, else `-D`), then `-c name=value` and `--name=value` on the
command line, the later winning. Each setting says where it was read ("file, line N")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pinchpoint.collect.servers import files

# PostgreSQL 15's defaults of what `init` reads.
DEFAULTS = {
    "log_destination": "stderr",
    "logging_collector": "off",
    "log_directory": "log",
    "log_filename": "postgresql-%Y-%m-%d_%H%M%S.log",
    "log_line_prefix": "%m [%p] ",
    "log_min_duration_statement": "-1",
    "log_duration": "off",
    "log_rotation_age": "1d",
    "log_rotation_size": "10MB",
}
COMMAND_LINE = "command line"
CONFIG_FILE = "postgresql.conf"
AUTO_FILE = "postgresql.auto.conf"
# Files included within files, at most: an include loop ends.
MOST_DEPTH = 10
MAX_FILE_BYTES = 4 * 1024 * 1024

_NAME = r"[A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)?"
_LINE = re.compile(
    rf"\s*(?P<name>{_NAME})\s*=?\s*(?P<value>'(?:[^'\\\n]|\\.|'')*'|[^\s#']+)\s*(?:#.*)?"
)
_ESCAPE = re.compile(r"''|\\(.)")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_INCLUDES = ("include", "include_if_exists", "include_dir")


@dataclass(frozen=True)
class Setting:
    """A setting's value and where it was read: a file's line, or the command line."""

    value: str
    source: str
    file: Path | None = None


@dataclass
class PgSettings:
    """The settings read, the files they came from, and what could not be read."""

    values: dict[str, Setting] = field(default_factory=dict)
    config_file: Path | None = None
    data_dir: Path | None = None
    problems: list[str] = field(default_factory=list)

    def value(self, name: str) -> str:
        """The setting's value, PostgreSQL's default when none was read."""
        found = self.values.get(name)
        return found.value if found is not None else DEFAULTS.get(name, "")

    def source(self, name: str) -> str:
        found = self.values.get(name)
        return found.source if found is not None else "PostgreSQL's default"

    def file(self, name: str) -> Path | None:
        """The file that sets it; None when the command line does, or nothing does."""
        found = self.values.get(name)
        return found.file if found is not None else None


def settings_of(argv: list[str], cwd: Path | None) -> PgSettings:
    """The settings of the postmaster run as `argv`, whose working directory is `cwd` (the
    postmaster runs in its data directory)."""
    given, config_dir = command_line(argv)
    if config_dir is None or not config_dir.is_absolute():
        config_dir = cwd
    out = PgSettings()
    config_file = given.get("config_file")
    if config_file is not None:
        out.config_file = _under(config_dir, config_file.value)
    elif config_dir is not None:
        out.config_file = config_dir / CONFIG_FILE
    if out.config_file is not None:
        read_file(out.config_file, out, required=True)
    data_dir = given.get("data_directory") or out.values.get("data_directory")
    out.data_dir = _under(config_dir, data_dir.value) if data_dir is not None else config_dir
    if out.data_dir is not None:
        read_file(out.data_dir / AUTO_FILE, out, required=False)
    out.values.update(given)
    return out


def command_line(argv: list[str]) -> tuple[dict[str, Setting], Path | None]:
    """The settings given on a postmaster's command line (`-c name=value`, `--name=value`)
    and its `-D` folder."""
    found: dict[str, Setting] = {}
    folder = None
    args = iter(argv[1:])
    for arg in args:
        if arg in ("-c", "-D"):
            value = next(args, "")
        elif arg.startswith(("-c", "-D")) or (arg.startswith("--") and "=" in arg):
            value = arg[2:]
        else:
            continue
        if arg.startswith("-D"):
            folder = Path(value)
            continue
        name, eq, text = value.partition("=")
        if eq:
            found[name.strip().lower().replace("-", "_")] = Setting(text, COMMAND_LINE)
    return found, folder


def read_file(path: Path, into: PgSettings, required: bool, depth: int = 0) -> None:
    """Reads a config file's settings into `into`, following its includes."""
    try:
        text = files.read_text(path, MAX_FILE_BYTES)
    except OSError as e:
        if required:
            into.problems.append(f"cannot read {path}: {e.strerror or type(e).__name__}")
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            into.problems.append(f"line {number} of {path} does not parse: {line.strip()!r}")
            continue
        name, value = match["name"].lower(), unquote(match["value"])
        if name in _INCLUDES:
            _include(path.parent, name, value, into, depth)
        else:
            into.values[name] = Setting(value, f"{path}, line {number}", path)


def _include(folder: Path, how: str, value: str, into: PgSettings, depth: int) -> None:
    if depth >= MOST_DEPTH:
        into.problems.append(f"includes nested over {MOST_DEPTH} deep: {value} not read")
        return
    target = _under(folder, value)
    if how != "include_dir":
        read_file(target, into, required=how == "include", depth=depth + 1)
        return
    try:
        names = files.regular_files_in(target)
    except OSError as e:
        into.problems.append(f"cannot read {target}: {e.strerror or type(e).__name__}")
        return
    for name in names:
        if name.endswith(".conf") and not name.startswith("."):
            read_file(target / name, into, required=True, depth=depth + 1)


def unquote(value: str) -> str:
    """A config value without its quotes, `''` and backslash escapes resolved."""
    if len(value) < 2 or not value.startswith("'"):
        return value
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m[1], m[1]) if m[1] else "'", value[1:-1])


def quoted(value: str) -> str:
    """A value as a config file holds it."""
    return "'" + value.replace("'", "''") + "'"


def _under(folder: Path | None, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() or folder is None else folder / path


def is_on(value: str) -> bool:
    """A boolean setting's value as PostgreSQL reads it (`on`, `true`, `yes`, `1`, a prefix
    of them)."""
    text = value.strip().lower()
    return text in ("on", "1") or (
        bool(text) and ("true".startswith(text) or "yes".startswith(text))
    )


_UNITS_MS = {
    "us": 0.001,
    "ms": 1.0,
    "s": 1000.0,
    "min": 60_000.0,
    "h": 3_600_000.0,
    "d": 86_400_000.0,
}
_TIME = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([a-z]*)\s*")


def milliseconds(value: str) -> float | None:
    """A time setting in milliseconds (`250`, `250ms`, `1s`); None when it does not read."""
    match = _TIME.fullmatch(value.lower())
    if match is None or match[2] not in ("", *_UNITS_MS):
        return None
    return float(match[1]) * _UNITS_MS.get(match[2], 1.0)
