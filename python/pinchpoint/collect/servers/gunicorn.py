"""gunicorn's settings as gunicorn itself settles them: its defaults, then `WEB_CONCURRENCY`,
then the config file (`-c FILE`, else `./gunicorn.conf.py`), then `GUNICORN_CMD_ARGS`, then
the command line, the later winning. Its pool from them (a sync worker class given threads
becomes gthread, as in gunicorn), and where it listens, logs and writes its pid. The config
file is Python: it is read as a syntax tree, never run."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence
from pathlib import Path

from pinchpoint.collect.servers.argv import option, split
from pinchpoint.collect.servers.files import read_text
from pinchpoint.collect.servers.pool import ASYNC, SYNC, THREADS, Pool, ServerProcess

_KEYS = {
    "workers": (("--workers",), ("-w",)),
    "threads": (("--threads",), ()),
    "worker_class": (("--worker-class",), ("-k",)),
}
# Where it listens, logs and writes its pid, by the names of gunicorn's settings.
SERVED_KEYS = {
    "bind": (("--bind",), ("-b",)),
    "accesslog": (("--access-logfile",), ()),
    "access_log_format": (("--access-logformat",), ()),
    "errorlog": (("--error-logfile", "--log-file"), ()),
    "pidfile": (("--pid",), ("-p",)),
}
_ALL_KEYS = {**_KEYS, **SERVED_KEYS}
_EVENT_LOOPS = ("uvicorn", "gevent", "eventlet", "tornado", "aiohttp", "asgi", "trio")
DEFAULT_CONFIG = "gunicorn.conf.py"


def is_gunicorn(argv: Sequence[str]) -> bool:
    """Whether the command line is gunicorn's (its script, `python -m gunicorn`, or a title
    set by setproctitle)."""
    heads = [os.path.basename(a) for a in argv[:3]]
    return any(h.startswith("gunicorn") for h in heads) or argv[0].startswith("gunicorn:")


def read(process: ServerProcess, cores: int, files: bool) -> Pool:
    """The pool of the gunicorn whose master is `process`; config files read only when
    `files`."""
    return _pool(settings(process, cores, files), process.children)


def settings(process: ServerProcess, cores: int, files: bool = True) -> dict[str, tuple[str, str]]:
    """The settings of the gunicorn whose master is `process` that it gave a value (its pool's
    and SERVED_KEYS), each as (value, where it was read); a list (`bind`) comma-joined."""
    found: dict[str, tuple[str, str]] = {}
    if "WEB_CONCURRENCY" in process.environ:
        found["workers"] = (process.environ["WEB_CONCURRENCY"], "WEB_CONCURRENCY")
    env_argv = split(process.environ.get("GUNICORN_CMD_ARGS", ""))
    config = option(process.argv, ("--config",), ("-c",)) or option(
        env_argv, ("--config",), ("-c",)
    )
    if files:
        found.update(_config_file(process, config, cores))
    found.update(_options(env_argv, "GUNICORN_CMD_ARGS"))
    found.update(_options(process.argv, "command line"))
    return found


def _options(argv: Sequence[str], source: str) -> dict[str, tuple[str, str]]:
    found = {}
    for key, (long, short) in _ALL_KEYS.items():
        value = option(argv, long, short)
        if value is not None:
            found[key] = (value, source)
    return found


def _config_file(
    process: ServerProcess, name: str | None, cores: int
) -> dict[str, tuple[str, str]]:
    if name is not None and name.startswith("python:"):
        return {}  # a module on the server's path: not a file to read
    path = process.path(name or DEFAULT_CONFIG)
    try:
        tree = ast.parse(read_text(path))
        return _assigned(tree, path, cores)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return {}


def _assigned(tree: ast.Module, path: Path, cores: int) -> dict[str, tuple[str, str]]:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in _ALL_KEYS:
                value = _literal(node.value, cores)
                if value is not None:
                    found[target.id] = (str(value), f"config file {path}")
    return found


def _literal(node: ast.expr, cores: int) -> int | str | None:
    """A config value built from constants, arithmetic and the host's CPU count
    (`multiprocessing.cpu_count() * 2 + 1`), strings joined with `+`, a list of strings
    (comma-joined); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        items = [_literal(item, cores) for item in node.elts]
        strings = [item for item in items if isinstance(item, str)]
        return ",".join(strings) if strings and len(strings) == len(items) else None
    if isinstance(node, ast.Call) and not node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return cores if name == "cpu_count" else None
    if isinstance(node, ast.BinOp):
        left, right = _literal(node.left, cores), _literal(node.right, cores)
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return left + right
        if not isinstance(left, int) or not isinstance(right, int):
            return None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv) and right:
            return left // right
    return None


def _count(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value > 0 else None


def _pool(settings: dict[str, tuple[str, str]], children: int) -> Pool:
    worker_class, class_source = settings.get("worker_class", ("sync", "default"))
    threads = _count(settings.get("threads", ("1", ""))[0]) or 1
    lowered = worker_class.lower()
    if any(loop in lowered for loop in _EVENT_LOOPS):
        kind = ASYNC
    elif lowered.endswith("gthread") or threads > 1:
        kind = THREADS
    else:
        kind = SYNC
    workers = _count(settings["workers"][0]) if "workers" in settings else None
    sources = [settings[k][1] for k in ("workers", "threads") if k in settings]
    if workers is None:
        # Its running workers are the pool's processes whatever set them (gunicorn's default 1).
        workers = children or 1
        sources.insert(0, "its worker processes counted" if children else "gunicorn's default")
    if kind == ASYNC:
        sources.append(f"worker class {worker_class} ({class_source})")
    return Pool("gunicorn", kind, workers, threads if kind == THREADS else 1, _joined(sources))


def _joined(sources: list[str]) -> str:
    return "; ".join(dict.fromkeys(s for s in sources if s))
