"""The probe runs inside users' apps: standard library only, nothing else of pinchpoint, and
importing it does nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from probe_helpers import PYTHON_DIR

PROBE_DIR = PYTHON_DIR / "pinchpoint" / "probe"
PROBE_MODULES = {path.stem for path in PROBE_DIR.glob("*.py")}


def test_probe_files_import_only_the_standard_library_and_each_other() -> None:
    assert {"__init__", "work", "wsgi", "asgi", "timing"} <= PROBE_MODULES
    for path in PROBE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 1, f"{path.name} reaches outside the probe package"
                assert node.module in PROBE_MODULES, f"{path.name}: from .{node.module}"
                continue
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top == "__future__", (
                    f"{path.name} imports {name}"
                )


def test_importing_the_probe_loads_only_standard_modules_and_has_no_side_effects(
    tmp_path: Path,
) -> None:
    script = """
import json, os, sys, threading
before = set(sys.modules)
files_before = sorted(os.listdir("."))
import pinchpoint.probe
print(json.dumps({
    "new": sorted(set(sys.modules) - before),
    "threads": threading.active_count(),
    "files": sorted(os.listdir(".")) == files_before,
}))
"""
    out = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, {str(PYTHON_DIR)!r})\n" + script,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(out.stdout)
    foreign = [
        name
        for name in report["new"]
        if name.split(".")[0] not in sys.stdlib_module_names
        and name not in {"pinchpoint", "pinchpoint.probe"}
        and not name.startswith("pinchpoint.probe.")
    ]
    assert foreign == []
    assert report["threads"] == 1
    assert report["files"] is True
    assert list(tmp_path.iterdir()) == []
