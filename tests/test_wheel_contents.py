"""The wheel ships the product, not the test bench: no module of the diagnosis matrix, of the
seeded scenarios or of their stack builders, and no module that only the tests reach.

maturin packs `python-source`'s package named by `module-name` (`python/pinchpoint/`),
plus the compiled engine and the metadata; the lab (`python/pinchpoint_lab/`) sits beside
it, importable from the editable install, left out of the wheel. The quick tests read that
rule from pyproject.toml and the package's modules from the source; the last one builds
the wheel for real with maturin (minutes: it compiles the engine) and checks both against
what the wheel holds:

    PINCHPOINT_BUILD_WHEEL=1 .venv/bin/python -m pytest tests/test_wheel_contents.py
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MATURIN = PYPROJECT["tool"]["maturin"]
PACKAGE_NAME = MATURIN["module-name"].split(".")[0]
PACKAGE = ROOT / MATURIN["python-source"] / PACKAGE_NAME
LAB = ROOT / MATURIN["python-source"] / "pinchpoint_lab"
# What the tests and benches build their stacks from, in the lab, and where each was in
# the package before: never there again.
LAB_MODULES = {
    "matrix": "demo.matrix",
    "matrix.build": "demo.matrix.build",
    "matrix.capacity": "demo.matrix.capacity",
    "matrix.draws": "demo.matrix.draws",
    "matrix.run": "demo.matrix.run",
    "matrix.score": "demo.matrix.score",
    "matrix.spec": "demo.matrix.spec",
    "scenarios": "demo.scenarios",
    "blkio": "demo.blkio",
    "cgroup": "demo.cgroup",
    "consistency": "analyze.consistency",
    "fanout_app": "demo.fanout_app",
    "neighbour": "demo.neighbour",
    "netns": "demo.netns",
    "postgres": "demo.postgres",
    "traced": "demo.traced",
    "uwsgi": "demo.uwsgi",
}
# Where users come in: `import pinchpoint`, `python -m pinchpoint`, the API; the console
# scripts are read from pyproject.toml.
ENTRIES = [PACKAGE_NAME, f"{PACKAGE_NAME}.__main__", f"{PACKAGE_NAME}.api"]
_NAMED = re.compile(rf"{PACKAGE_NAME}(?:\.\w+)+")


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(top: Path) -> dict[str, Path]:
    return {_module_name(p, top): p for p in sorted(top.rglob("*.py"))}


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name is in: itself, or the longest prefix that is a module
    (`pkg.mod.Class`, `pkg.mod:app()`)."""
    parts = name.split(":")[0].split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def _reached_from(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules this one imports (inside functions too) or names in a string
    (an app path handed to a server, `-m` arguments, `importlib.import_module`)."""
    names: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            named = _NAMED.match(node.value)
            if named:
                names.add(named.group(0))
    found = {k for k in (_known(n, modules) for n in names) if k is not None}
    # Importing a module imports the packages above it.
    return found | {".".join(m.split(".")[:i]) for m in found for i in range(1, m.count(".") + 1)}


def _unreached(modules: dict[str, Path], entries: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = [e for e in entries if e in modules]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(_reached_from(module, modules[module], modules) - seen)
    return set(modules) - seen


def _entries() -> list[str]:
    scripts = PYPROJECT["project"].get("scripts", {})
    return [*ENTRIES, *(target.split(":")[0] for target in scripts.values())]


def test_maturin_packs_the_package_alone() -> None:
    """The rule the wheel is built by: nothing beside `python/pinchpoint/` is packed, and
    the lab is not inside it."""
    assert set(MATURIN) & {"python-packages", "include"} == set(), (
        "the wheel would pack more than the package: check the lab stays out"
    )
    assert PACKAGE.is_dir()
    assert (LAB / "__init__.py").is_file()
    assert PACKAGE not in LAB.parents and LAB not in PACKAGE.parents


def test_the_package_holds_no_module_of_the_matrix_or_the_scenarios() -> None:
    lab = _modules(LAB)
    assert {f"pinchpoint_lab.{m}" for m in LAB_MODULES} <= set(lab), "the list is stale"
    package = _modules(PACKAGE)
    back = {f"{PACKAGE_NAME}.{m}" for m in LAB_MODULES.values()} & set(package)
    assert back == set(), "back in the package: the wheel would ship them"
    assert not any(part == "matrix" for m in package for part in m.split(".")), package


def test_every_module_of_the_package_is_reached_from_a_command_or_the_api() -> None:
    """A module only the tests or the benches import belongs in the lab: the wheel would
    ship it to every user for nothing."""
    unreached = _unreached(_modules(PACKAGE), _entries())
    assert unreached == set(), "reached from no entry point: used by tests only? move to lab"


def test_a_module_named_in_a_string_counts_as_reached(tmp_path: Path) -> None:
    top = tmp_path / PACKAGE_NAME
    (top / "sub").mkdir(parents=True)
    (top / "__init__.py").write_text("")
    (top / "sub" / "__init__.py").write_text("")
    (top / "sub" / "app.py").write_text("")
    (top / "sub" / "worker.py").write_text("")
    (top / "sub" / "lone.py").write_text("")
    (top / "cli.py").write_text(
        f'APP = "{PACKAGE_NAME}.sub.app:wsgi()"\n'
        f"def f() -> None:\n    from .sub.worker import Worker\n"
    )
    modules = _modules(top)
    assert _unreached(modules, [f"{PACKAGE_NAME}.cli"]) == {f"{PACKAGE_NAME}.sub.lone"}


@pytest.mark.skipif(
    os.environ.get("PINCHPOINT_BUILD_WHEEL") != "1",
    reason="builds the wheel with maturin (minutes): set PINCHPOINT_BUILD_WHEEL=1",
)
@pytest.mark.timeout(3600)
def test_the_built_wheel_holds_the_package_and_no_lab_module(tmp_path: Path) -> None:
    maturin = Path(sys.executable).parent / "maturin"
    done = subprocess.run(
        [maturin, "build", "--release", "-i", sys.executable, "-o", tmp_path, "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {PACKAGE_NAME}
    assert [n for n in names if "pinchpoint_lab" in n or "/matrix/" in n] == []
    shipped = {n for n in names if n.endswith(".py")}
    source = {
        p.relative_to(PACKAGE.parent).as_posix()
        for p in PACKAGE.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    # The quick tests' model of the wheel: exactly the package's source files.
    assert shipped == source
