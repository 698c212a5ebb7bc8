"""PHP-FPM's pools as its config files set them: php-fpm.conf (named in the master's title,
`php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)`, or by `-y`), and the pool files
it `include`s. Each `[pool]` section is a pool of processes that serve one request each:
`pm.max_children` of them at most, whatever `pm` (static, dynamic, ondemand) starts with.
The master serves all its pools: its slots are the sum of theirs."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pinchpoint.collect.servers.argv import count, option
from pinchpoint.collect.servers.files import glob, read_text
from pinchpoint.collect.servers.pool import SYNC, Pool, ServerProcess

_TITLE = re.compile(r"php-fpm: master process \((.+)\)")
# What a pool's section says of its processes, its socket and its log.
POOL_KEYS = (
    "pm",
    "pm.max_children",
    "pm.start_servers",
    "pm.min_spare_servers",
    "pm.max_spare_servers",
    "listen",
    "listen.backlog",
    "access.log",
    "access.format",
)
# Includes followed at most this deep (an include of itself ends).
_DEPTH = 8
# PHP-FPM's prefix of a relative include when no `-p` is given.
_PREFIX = "/usr"


@dataclass
class FpmPool:
    """One `[name]` section: its known keys, each as (value, the file it was read from)."""

    name: str
    settings: dict[str, tuple[str, str]] = field(default_factory=dict)


def is_php_fpm(argv: Sequence[str]) -> bool:
    """Whether the command line is PHP-FPM's (`php-fpm8.2 ...`, or its master's title)."""
    if not argv:
        return False
    return argv[0].startswith("php-fpm:") or os.path.basename(argv[0]).startswith("php-fpm")


def config_path(process: ServerProcess) -> Path | None:
    """The php-fpm.conf its master read: from its title, else `-y`/`--fpm-config`."""
    found = _TITLE.search(" ".join(process.argv))
    name = found.group(1) if found else option(process.argv, ("--fpm-config",), ("-y",))
    return process.path(name) if name else None


def pools(process: ServerProcess) -> list[FpmPool]:
    """The pools of the PHP-FPM whose master is `process`, in the order of its files; []
    when its config cannot be found or read."""
    path = config_path(process)
    if path is None:
        return []
    prefix = option(process.argv, ("--prefix",), ("-p",)) or _PREFIX
    found: dict[str, FpmPool] = {}
    _read(path, Path(prefix), found, depth=0)
    return list(found.values())


def _read(path: Path, prefix: Path, found: dict[str, FpmPool], depth: int) -> None:
    try:
        text = read_text(path)
    except OSError:
        return
    section = "global"
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), _unquoted(value)
        if not sep:
            continue
        if key == "include" and depth < _DEPTH:
            pattern = value if os.path.isabs(value) else str(prefix / value)
            for name in glob(pattern):
                _read(Path(name), prefix, found, depth + 1)
        elif section != "global" and key in POOL_KEYS:
            pool = found.setdefault(section, FpmPool(section))
            pool.settings[key] = (value.replace("$pool", section), str(path))


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value.split(";", 1)[0].strip()


def read(process: ServerProcess, cores: int, files: bool) -> Pool:
    """The pool of the PHP-FPM whose master is `process`: the sum of its pools'
    `pm.max_children`; its worker processes counted when no file says."""
    found = pools(process) if files else []
    sized = [(p, count(p.settings.get("pm.max_children", ("", ""))[0], cores)) for p in found]
    if not sized or any(children is None for _, children in sized):
        return Pool("php-fpm", SYNC, process.children or None, 1, "its worker processes counted")
    described = [_described(pool, children or 0) for pool, children in sized]
    return Pool("php-fpm", SYNC, sum(c or 0 for _, c in sized), 1, "; ".join(described))


def _described(pool: FpmPool, children: int) -> str:
    pm = pool.settings.get("pm", ("dynamic", ""))[0]
    where = pool.settings["pm.max_children"][1]
    text = f"pool {pool.name}: pm = {pm}, pm.max_children = {children} (config file {where})"
    if "listen.backlog" in pool.settings:
        text += f", listen.backlog = {pool.settings['listen.backlog'][0]}"
    return text
