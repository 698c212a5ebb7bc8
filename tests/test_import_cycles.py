"""The modules of the package import one another without a cycle: each can be read, and
moved, on its own. The graph is read from the source: every import counts, those inside
functions and under `if TYPE_CHECKING:` too, and a package's `__init__` is a module like
any other: a submodule that imports through its own package (`from pinchpoint.report
import fmt`) while the package's `__init__` imports that submodule is a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "pinchpoint"


def _modules(package: Path) -> dict[str, Path]:
    """Dotted name → source file; a stub (`_engine.pyi`) names a compiled module."""
    found = {}
    for path in sorted(package.rglob("*.py*")):
        if path.suffix not in (".py", ".pyi"):
            continue
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.setdefault(".".join(parts), path)
    return found


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement may name: for `from a import b`, both `a` and
    `a.b` (b may be a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}".rstrip(".")
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _graph(package: Path) -> dict[str, set[str]]:
    """Module → the modules of the package it imports. `from a import b` is an arrow to
    `a`, whose `__init__` runs first, and to the submodule `a.b` if there is one."""
    modules = _modules(package)
    # The top package's `__init__` runs before every module and imports nothing as it
    # runs, so passing through it (`from pinchpoint import _engine`) is no arrow.
    top = package.name
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        arrows = graph.setdefault(name, set())
        if path.suffix == ".pyi":
            continue
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(node, name, is_package):
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target not in (name, top):
                    arrows.add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without
    recursion), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_package_modules_form_no_cycle() -> None:
    graph = _graph(PACKAGE)
    assert len(graph) > 100, "the package's modules were not read"
    cycles = _cycles(graph)
    for cycle in cycles:
        print(f"cycle of {len(cycle)}: {', '.join(cycle)}")
    assert cycles == []


def test_a_planted_cycle_is_found(tmp_path: Path) -> None:
    """Through a function's import, a `TYPE_CHECKING` import, a relative import and a
    submodule taking a name from its own package's `__init__`."""
    package = tmp_path / "shop"
    (package / "cart").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "prices.py": "def total():\n    from shop.cart import items\n",
        "cart/__init__.py": "from shop.cart.items import Item\nCURRENCY = 'EUR'\n",
        "cart/items.py": (
            "from typing import TYPE_CHECKING\nfrom . import CURRENCY\n"
            "if TYPE_CHECKING:\n    from shop import prices\nclass Item: ...\n"
        ),
        "leaf.py": "import os\nfrom shop import prices\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    graph = _graph(package)
    assert graph["shop.leaf"] == {"shop.prices"}
    assert graph["shop.cart.items"] == {"shop.cart", "shop.prices"}
    assert _cycles(graph) == [["shop.cart", "shop.cart.items", "shop.prices"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
