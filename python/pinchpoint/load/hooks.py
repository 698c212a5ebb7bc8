"""A flow's hook: a Python function that changes a request before it is sent, for what
a plan cannot say (a signature, a computed body). Named `file.py:function` (the file's
path, relative to the working folder) or `package.module:function`.

The engine calls it as `hook(request, vars)` on a thread of its own, one call at a time,
with `request` a dict (`step`: the endpoint index, `method`, `path`, `headers`: a list of
(name, value) pairs, `body`: bytes) and `vars` the user's variables. It changes
`request` in place, or returns a new dict of the same keys; an exception makes that
request an error of class `capture` and the user starts its flow again.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

Hook = Callable[[dict, dict], dict | None]


def load_hook(spec: str) -> Hook:
    """The function `spec` names; ValueError says what is wrong with it."""
    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise ValueError(f"hook {spec!r}: expected file.py:function or module:function")
    if where.endswith(".py"):
        path = Path(where)
        module_spec = importlib.util.spec_from_file_location(f"pinchpoint_hook_{path.stem}", path)
        if module_spec is None or module_spec.loader is None or not path.is_file():
            raise ValueError(f"hook {spec!r}: no file {where}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:  # the user's file: any error it raises is theirs to see
            raise ValueError(
                f"hook {spec!r}: {where} fails to load: {type(e).__name__}: {e}"
            ) from None
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(f"hook {spec!r}: cannot import {where}: {e}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"hook {spec!r}: {where} has no function {name}")
    return function
