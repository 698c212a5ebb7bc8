"""Data flows one way: plan → load + collect → run folder → analyze → report, with the
commands on top. Each part of the package may import only its own layer or the layers
below it, found from the source (imports inside functions count too), so that a backward
arrow cannot creep in unseen. The arrows that still run backwards are listed by name,
each to be removed, never added to."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "pinchpoint"

# Lowest first. A part not listed fails the test: place it when it is added.
LAYERS: list[set[str]] = [
    {
        "rundir",
        "probe",
        "_engine",
        "logformats",
        "lifecycle",
    },
    {"plan", "redact"},
    {"load", "collect"},
    {"analyze"},
    {"report"},
    {
        "compare",
        "importers",
        "pipeline",
        "terminal",
        "outputs",
        "api",
    },
    # Reads the running stack's configs into a plan's text: above collect (servers' pools).
    {"discover"},
    {"demo", "agent"},
    {"cli", "__main__", "__init__"},
]
# Parts that import nothing else of pinchpoint: the probe runs inside users' apps, the run
# folder's definitions are read by every stage, and the log formats are compiled by the
# plan's check as well as read by collection.
ALONE = {"probe", "rundir", "logformats"}


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "pinchpoint" and len(parts) > 1 else None


def _imports() -> set[tuple[str, str, str]]:
    """(importing file, importer part, imported part) for every import of another part."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        part = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
                if node.module == "pinchpoint":
                    targets = [f"pinchpoint.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                other = _part(target)
                if other is not None and other != part:
                    found.add((str(rel), part, other))
    return found


def _layer(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {p.name.removesuffix(".py") for p in PACKAGE.iterdir()}
    # Not parts: the compiled module's files (and its stub), caches and the typing marker.
    skipped = {"__pycache__", "py.typed"}
    parts = {p for p in parts if not p.startswith((".", "_engine.")) and p not in skipped}
    placed = set().union(*LAYERS)
    assert parts - placed == set(), "place these in LAYERS"


def test_no_part_imports_a_later_stage() -> None:
    backward = {
        (where, part, other) for where, part, other in _imports() if _layer(other) > _layer(part)
    }
    assert backward == set()


def test_the_probe_and_the_run_folder_definitions_stand_alone() -> None:
    leaning = {(where, other) for where, part, other in _imports() if part in ALONE}
    assert leaning == set()


LAB = "pinchpoint_lab"


def _lab_references(path: Path) -> list[str]:
    """Where a module of the package names the lab: an import of it, or a string naming
    one of its modules (an app path handed to a server, an `importlib` name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value] if node.value.startswith(f"{LAB}.") else []
        else:
            continue
        found += [n for n in names if n == LAB or n.startswith(f"{LAB}.")]
    return found


def test_the_package_never_imports_the_lab() -> None:
    """The lab (the matrix, the seeded scenarios and their stacks) imports pinchpoint, for
    the tests and the benches; the package, which the wheel ships without it, never
    imports the lab."""
    lab = PACKAGE.parent / LAB
    assert (lab / "__init__.py").is_file()
    leaning = {
        (str(path.relative_to(PACKAGE)), name)
        for path in PACKAGE.rglob("*.py")
        for name in _lab_references(path)
    }
    assert leaning == set()
    assert any(
        name.startswith("pinchpoint.")
        for path in lab.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module
        for name in [node.module]
    ), "the lab is read: it builds on pinchpoint"


def test_a_string_naming_a_lab_module_counts_as_a_reference(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        f'import os\nfrom {LAB}.traced import X\nAPP = "{LAB}.fanout_app:gateway()"\n'
        'NAME = "pinchpoint_labs"\n',
        encoding="utf-8",
    )
    assert _lab_references(module) == [f"{LAB}.traced", f"{LAB}.fanout_app:gateway()"]


CRATES = PACKAGE.parent.parent / "crates"


# A path into the crate: from its root (`crate::`), from the module itself (`self::`) or
# from its parents (`super::`, `super::super::`).
_RUST_PATH = re.compile(r"\b(crate|self|(?:super::)*super)((?:::[a-z_0-9]+)+)")


def _resolve(module: list[str], start: str, rest: str) -> list[str]:
    """The path from the crate's root that `start` + `rest` names inside `module` (a file's
    module path: `drive/walk.rs` is ["drive", "walk"], `drive/mod.rs` is ["drive"])."""
    names = rest.strip(":").split("::")
    if start == "crate":
        return names
    if start == "self":
        return [*module, *names]
    ups = start.count("super")
    return [*module[: max(len(module) - ups, 0)], *names]


def _crate_graph(src: Path) -> dict[str, set[str]]:
    """Module → modules of the same crate it names (`crate::a::b`, `super::b`, `self::b`),
    from the source. A module is a file or a folder's `mod.rs`, two levels deep at most
    (`client::http1` holds its folder's files); a parent naming its own children is not an
    arrow, as it declares them. Test modules are left out."""

    def node(parts: list[str]) -> str:
        return "::".join(parts[:2])

    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.rs"):
        parts = [p.removesuffix(".rs") for p in path.relative_to(src).parts]
        parts = [p for p in parts if p != "mod"]
        if parts in (["lib"], ["main"]):
            continue
        module = node(parts)
        text = path.read_text(encoding="utf-8").split("#[cfg(test)]")[0]
        used = set()
        for start, rest in _RUST_PATH.findall(text):
            names = _resolve(parts, start, rest)
            used.add(node(names if len(names) < 2 or names[1][0].islower() else names[:1]))
        graph.setdefault(module, set()).update(
            u for u in used if u != module and not u.startswith(module + "::")
        )
    known = set(graph)
    # `crate::client::Target` names the module client, not one called Target.
    return {
        m: {u if u in known else u.split("::")[0] for u in used} - {m} for m, used in graph.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append(path)
                elif nxt not in path and nxt > start:
                    stack.append((nxt, [*path, nxt]))
    return found


def test_the_crates_modules_form_no_cycle() -> None:
    for crate in ("pinchpoint-engine", "pinchpoint-logs"):
        graph = _crate_graph(CRATES / crate / "src")
        assert len(graph) > 3, f"{crate}: no modules read"
        assert _cycles(graph) == [], crate


def _folders(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of the crate's top-level modules: each folder one node."""
    out: dict[str, set[str]] = {}
    for module, used in graph.items():
        top = module.split("::")[0]
        out.setdefault(top, set()).update(u.split("::")[0] for u in used)
    return {m: used - {m} for m, used in out.items()}


def test_the_crates_folders_form_no_cycle() -> None:
    for crate in ("pinchpoint-engine", "pinchpoint-logs"):
        folders = _folders(_crate_graph(CRATES / crate / "src"))
        assert _cycles(folders) == [], crate


def test_a_cycle_between_two_folders_is_found() -> None:
    graph = {"config": {"drive::schedule"}, "drive::open": {"config"}, "drive::schedule": set()}
    assert _cycles(graph) == []
    assert _cycles(_folders(graph)) == [["config", "drive"]]


def test_a_cycle_between_two_modules_is_found() -> None:
    assert _cycles({"run": {"open_loop"}, "open_loop": {"run", "stats"}, "stats": set()}) == [
        ["open_loop", "run"]
    ]


def test_paths_from_the_module_itself_and_its_parents_are_arrows(tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    (drive / "mod.rs").write_text("pub mod walk;\npub mod walk_ws;\nuse self::walk::run;\n")
    (drive / "walk.rs").write_text("fn f() { super::walk_ws::send(); }\n")
    (drive / "walk_ws.rs").write_text("use crate::drive::walk::State;\n")
    (tmp_path / "stats.rs").write_text("use super::drive::walk::State;\n")
    graph = _crate_graph(tmp_path)
    assert graph == {
        "drive": set(),
        "drive::walk": {"drive::walk_ws"},
        "drive::walk_ws": {"drive::walk"},
        "stats": {"drive::walk"},
    }
    assert _cycles(graph) == [["drive::walk", "drive::walk_ws"]]
