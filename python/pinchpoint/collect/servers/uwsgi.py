"""uWSGI's settings as uWSGI settles them: `UWSGI_*` variables, then its config files
(`--ini`, `--yaml`, `--xml`, `--json`, or a file named on the command line by its
extension), then its options, the later winning. Its pool from them: its slots are
processes × threads; its async modes (`--async`, `--gevent`) serve any number of waiting
requests per process. And where it listens, logs and writes its pid."""

from __future__ import annotations

import configparser
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from pinchpoint.collect.servers.argv import count, flag, option
from pinchpoint.collect.servers.files import read_text
from pinchpoint.collect.servers.pool import ASYNC, SYNC, THREADS, Pool, ServerProcess

_KEYS = {
    "processes": (("--processes", "--workers"), ("-p",)),
    "threads": (("--threads",), ()),
    "async": (("--async",), ()),
    "gevent": (("--gevent",), ()),
}
# Where it listens, logs and writes its pid.
SERVED_KEYS = {
    "socket": (("--socket", "--uwsgi-socket"), ("-s",)),
    "http-socket": (("--http-socket",), ()),
    "http": (("--http",), ()),
    "req-logger": (("--req-logger",), ()),
    "logger": (("--logger",), ()),
    "logto": (("--logto", "--logto2"), ()),
    "daemonize": (("--daemonize", "--daemonize2"), ()),
    "log-format": (("--log-format", "--logformat"), ()),
    "pidfile": (("--pidfile", "--pidfile2"), ()),
}
# Options that take no value: "true" when given.
FLAGS = {
    "master": (("--master",), ("-M",)),
    "disable-logging": (("--disable-logging",), ("-L",)),
}
_ALL_KEYS = {**_KEYS, **SERVED_KEYS}
_ALIASES = {
    "workers": "processes",
    "uwsgi-socket": "socket",
    "logformat": "log-format",
    "logto2": "logto",
    "daemonize2": "daemonize",
    "pidfile2": "pidfile",
}
_TRUE = ("true", "1", "yes", "on", "")
_FILES = {".ini": "ini", ".yaml": "yaml", ".yml": "yaml", ".xml": "xml", ".json": "json"}
_FILE_OPTIONS = {
    "--ini": "ini",
    "--yaml": "yaml",
    "-y": "yaml",
    "--xml": "xml",
    "-x": "xml",
    "--json": "json",
    "-j": "json",
}


def is_uwsgi(argv: Sequence[str]) -> bool:
    return os.path.basename(argv[0]).lower().startswith("uwsgi")


def read(process: ServerProcess, cores: int, files: bool) -> Pool:
    """The pool of the uWSGI whose first process is `process`; config files read only when
    `files`."""
    return _pool(settings(process, files), process, cores)


def settings(process: ServerProcess, files: bool = True) -> dict[str, tuple[str, str]]:
    """The settings of the uWSGI whose first process is `process` that it gave a value (its
    pool's, SERVED_KEYS and FLAGS), each as (value, where it was read); config files read
    only when `files`."""
    found: dict[str, tuple[str, str]] = {}
    for key in _KEYS:
        variable = f"UWSGI_{key.upper()}"
        if variable in process.environ:
            found[key] = (process.environ[variable], variable)
    if files:
        for kind, name in _config_files(process.argv):
            path = process.path(name.split(":", 1)[0])
            for key, value in _read_config(path, kind).items():
                found[key] = (value, f"config file {path}")
    for key, (long, short) in _ALL_KEYS.items():
        given = option(process.argv, long, short)
        if given is not None:
            found[key] = (given, "command line")
    for key, (long, short) in FLAGS.items():
        if flag(process.argv, long, short):
            found[key] = ("true", "command line")
    return found


def is_set(found: dict[str, tuple[str, str]], key: str) -> bool:
    """Whether a flag is on in `settings`' answer (`master = true` in a file, `--master`)."""
    return key in found and found[key][0].strip().lower() in _TRUE


def _config_files(argv: Sequence[str]) -> list[tuple[str, str]]:
    """The config files named on the command line, in order, with their kind."""
    found = []
    for i, arg in enumerate(argv[1:], start=1):
        name, eq, value = arg.partition("=")
        if name in _FILE_OPTIONS:
            target = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            found.append((_FILE_OPTIONS[name], target))
        elif not arg.startswith("-") and not argv[i - 1].startswith("-"):
            kind = _FILES.get(Path(arg.split(":", 1)[0]).suffix)
            if kind is not None:
                found.append((kind, arg))
    return [(kind, name) for kind, name in found if name]


def _read_config(path: Path, kind: str) -> dict[str, str]:
    """The known keys in a config file's `uwsgi` section, `%d` (the file's folder) filled in;
    {} when it cannot be read."""
    try:
        text = read_text(path)
    except OSError:
        return {}
    try:
        section = _SECTION_READERS[kind](text)
    except (ValueError, RecursionError, configparser.Error, ET.ParseError):
        return {}
    out = {}
    for key, value in section.items():
        key = _ALIASES.get(key.strip(), key.strip())
        if key in _ALL_KEYS or key in FLAGS:
            out[key] = str(value).replace("%d", f"{path.parent}/")
    return out


def _ini(text: str) -> dict[str, str]:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    return dict(parser["uwsgi"]) if parser.has_section("uwsgi") else {}


def _yaml(text: str) -> dict[str, str]:
    """The `uwsgi:` mapping of a YAML file, as uWSGI's own reader takes it: one
    `key: value` a line, indented below it."""
    out: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            inside = line.strip() == "uwsgi:"
            continue
        key, sep, value = line.strip().partition(":")
        if inside and sep:
            out[key.strip()] = value.strip()
    return out


def _xml(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    return {child.tag: (child.text or "").strip() for child in root} if root.tag == "uwsgi" else {}


def _json(text: str) -> dict[str, str]:
    document = json.loads(text)
    section = document.get("uwsgi", {}) if isinstance(document, dict) else {}
    return {str(k): str(v) for k, v in section.items()} if isinstance(section, dict) else {}


_SECTION_READERS = {"ini": _ini, "yaml": _yaml, "xml": _xml, "json": _json}


def _pool(settings: dict[str, tuple[str, str]], process: ServerProcess, cores: int) -> Pool:
    def number(key: str) -> int | None:
        return count(settings[key][0], cores) if key in settings else None

    sources = [settings[k][1] for k in ("processes", "threads") if k in settings]
    if number("async") or number("gevent"):
        key = "async" if number("async") else "gevent"
        return Pool(
            "uwsgi", ASYNC, number("processes") or 1, 1, _joined([*sources, settings[key][1]])
        )
    threads = number("threads") or 1
    processes = number("processes")
    if processes is None:
        master = is_set(settings, "master")
        # Without a master the first process is a worker and forks the others.
        processes = (process.children if master else process.children + 1) or 1
        sources.insert(0, "its worker processes counted")
    kind = THREADS if threads > 1 else SYNC
    return Pool("uwsgi", kind, processes, threads, _joined(sources))


def _joined(sources: list[str]) -> str:
    return "; ".join(dict.fromkeys(s for s in sources if s))
