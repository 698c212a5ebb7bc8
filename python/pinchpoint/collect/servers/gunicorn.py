"""gunicorn's pool as gunicorn itself settles it: its defaults, then `WEB_CONCURRENCY`, then
the config file (`-c FILE`, else `./gunicorn.conf.py`), then `GUNICORN_CMD_ARGS`, then the
command line, the later winning. A sync worker class given threads becomes gthread, as in
gunicorn. The config file is Python: it is read as a syntax tree, never run."""

from __future__ import annotations

import ast
import os
from collections.abc import Sequence

from pinchpoint.collect.servers.argv import option, split
from pinchpoint.collect.servers.pool import ASYNC, SYNC, THREADS, Pool, ServerProcess

_KEYS = {
    "workers": (("--workers",), ("-w",)),
    "threads": (("--threads",), ()),
    "worker_class": (("--worker-class",), ("-k",)),
}
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
    settings: dict[str, tuple[str, str]] = {}
    if "WEB_CONCURRENCY" in process.environ:
        settings["workers"] = (process.environ["WEB_CONCURRENCY"], "WEB_CONCURRENCY")
    env_argv = split(process.environ.get("GUNICORN_CMD_ARGS", ""))
    config = option(process.argv, ("--config",), ("-c",)) or option(
        env_argv, ("--config",), ("-c",)
    )
    if files:
        settings.update(_config_file(process, config, cores))
    settings.update(_options(env_argv, "GUNICORN_CMD_ARGS"))
    settings.update(_options(process.argv, "command line"))
    return _pool(settings, process.children)


def _options(argv: Sequence[str], source: str) -> dict[str, tuple[str, str]]:
    found = {}
    for key, (long, short) in _KEYS.items():
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
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in _KEYS:
                value = _literal(node.value, cores)
                if value is not None:
                    found[target.id] = (str(value), f"config file {path}")
    return found


def _literal(node: ast.expr, cores: int) -> int | str | None:
    """A config value built from constants, arithmetic and the host's CPU count
    (`multiprocessing.cpu_count() * 2 + 1`); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str):
        return node.value
    if isinstance(node, ast.Call) and not node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return cores if name == "cpu_count" else None
    if isinstance(node, ast.BinOp):
        left, right = _literal(node.left, cores), _literal(node.right, cores)
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
