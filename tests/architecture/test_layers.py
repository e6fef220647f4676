"""The layers import only downwards, and only the CLI prints (read from the sources with ``ast``).

    cli -> validate -> report | backend -> workspace -> kinds -> rules -> python | documents -> core

A module may import its own package and any package of a lower layer; packages that share a
layer are independent of each other. Imports under ``if TYPE_CHECKING:`` count too: an annotation
naming a type of a higher layer is the same knot (a type checker, a reader, a refactoring must load
the upper layer to understand the lower one). Inside a package the modules form no cycle either
(imports inside functions count: a deferred import hides a cycle, it does not remove it); the
package's ``__init__`` is its facade, above its own modules, and is left out of that check.
docs/architecture.md explains what lives where.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Package -> (layer, folder). rules/ and backend/ are top-level folders that ship inside the
# package (pyproject.toml's package-dir).
PACKAGES = {
    "cuda2neuron.core": (0, ROOT / "cuda2neuron" / "core"),
    "cuda2neuron.python": (1, ROOT / "cuda2neuron" / "python"),
    "cuda2neuron.documents": (1, ROOT / "cuda2neuron" / "documents"),
    "cuda2neuron.rules": (2, ROOT / "rules"),
    "cuda2neuron.kinds": (3, ROOT / "cuda2neuron" / "kinds"),
    "cuda2neuron.workspace": (4, ROOT / "cuda2neuron" / "workspace"),
    "cuda2neuron.report": (5, ROOT / "cuda2neuron" / "report"),
    "cuda2neuron.backend": (5, ROOT / "backend"),
    "cuda2neuron.validate": (6, ROOT / "cuda2neuron" / "validate"),
    "cuda2neuron.cli": (7, ROOT / "cuda2neuron" / "cli"),
}
# The top-level package: its __init__ holds the version, __main__ calls the CLI.
TOP = {"cuda2neuron": 0, "cuda2neuron.__main__": 7}
PRINTING_LIBRARIES = ("click", "rich")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the absolute name imported
    line: int


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = path.relative_to(folder).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((package, *parts))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _sources():
    for package, (_, folder) in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            yield package, path, _module_name(package, folder, path)
    for name in TOP:
        path = ROOT / "cuda2neuron" / (name.split(".", 1)[1] + ".py" if "." in name else "__init__.py")
        yield None, path, name


def _imports(module: str, path: Path, tree: ast.AST) -> list[Import]:
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, is_package, node.level, node.module) if node.level else node.module or ""
            found.append(Import(module, target, node.lineno))
            # `from cuda2neuron import rules` names a package too; `from . import _x` a module.
            found += [Import(module, f"{target}.{a.name}", node.lineno) for a in node.names
                      if target == "cuda2neuron" or f"{target}.{a.name}" in _MODULES]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.append(Import(module, node.args[0].value, node.lineno))
    return found


_MODULES = frozenset(module for _, _, module in _sources())


def _package_of(name: str) -> str | None:
    for package in PACKAGES:
        if name == package or name.startswith(package + "."):
            return package
    return None


def _layer(name: str) -> int | None:
    package = _package_of(name)
    if package is not None:
        return PACKAGES[package][0]
    return TOP.get(name)


def _all_imports() -> list[Import]:
    out = []
    for _, path, module in _sources():
        out += _imports(module, path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


def upward_imports(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        if not imp.target.startswith("cuda2neuron"):
            continue
        own, other = _package_of(imp.module), _package_of(imp.target)
        if own is not None and own == other:
            continue
        mine, theirs = _layer(imp.module), _layer(imp.target)
        if mine is None or theirs is None:
            continue
        if theirs > mine or (theirs == mine and own is not None and own != other and imp.target not in TOP):
            bad.append(f"{imp.module}:{imp.line} imports {imp.target} (layer {theirs} from layer {mine})")
    return bad


def package_cycles(imports: list[Import]) -> list[list[str]]:
    edges: dict[str, set[str]] = {}
    for imp in imports:
        a, b = _package_of(imp.module), _package_of(imp.target)
        if a and b and a != b:
            edges.setdefault(a, set()).add(b)
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append([*path[path.index(nxt):], nxt] if nxt in path else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return cycles


def module_cycles(imports: list[Import]) -> list[list[str]]:
    """Cycles between the modules of one package (its ``__init__`` left out: the facade)."""
    edges: dict[str, set[str]] = {}
    for imp in imports:
        target = imp.target
        while target and target not in _MODULES and "." in target:
            target = target.rpartition(".")[0]
        own = _package_of(imp.module)
        if own is None or own != _package_of(target) or own in (imp.module, target) or target == imp.module:
            continue
        edges.setdefault(imp.module, set()).add(target)
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    return cycles


def test_no_upward_import():
    assert upward_imports(_all_imports()) == []


def test_no_import_cycle_between_packages():
    assert package_cycles(_all_imports()) == []


def test_no_import_cycle_between_the_modules_of_a_package():
    assert module_cycles(_all_imports()) == []


@pytest.mark.parametrize(
    ("module", "target", "bad"),
    [
        pytest.param("cuda2neuron.core._rule", "cuda2neuron.rules", True, id="core-imports-catalog"),
        pytest.param("cuda2neuron.rules.x", "cuda2neuron.kinds", True, id="rule-imports-kinds"),
        pytest.param("cuda2neuron.python._lint", "cuda2neuron.documents.shell", True, id="peers-in-one-layer"),
        pytest.param("cuda2neuron.backend._build", "cuda2neuron.cli", True, id="backend-imports-cli"),
        pytest.param("cuda2neuron.kinds._python", "cuda2neuron.python", False, id="kinds-imports-python"),
        pytest.param("cuda2neuron.cli._check", "cuda2neuron.workspace", False, id="cli-imports-workspace"),
    ],
)
def test_the_checker_tells_up_from_down(module, target, bad):
    assert bool(upward_imports([Import(module, target, 1)])) is bad


def test_the_cycle_finder_finds_a_cycle():
    imports = [Import("cuda2neuron.core._a", "cuda2neuron.kinds", 1), Import("cuda2neuron.kinds._b", "cuda2neuron.core", 1)]
    assert package_cycles(imports)


# Real module names: the finder tells a module from a name in it by the tree on disk.
@pytest.mark.parametrize(
    ("imports", "cycle"),
    [
        pytest.param([("workspace._pool", "workspace._runner"), ("workspace._runner", "workspace._pool")], True,
                     id="two-modules"),
        pytest.param([("workspace._pool", "workspace._runner.process_file"), ("workspace._runner", "workspace._cache"),
                      ("workspace._cache", "workspace._pool")], True, id="three-modules-via-a-name"),
        pytest.param([("backend._build", "backend"), ("backend", "backend._build")], False, id="facade-init"),
        pytest.param([("workspace._runner", "workspace._pool")], False, id="one-way"),
    ],
)
def test_the_module_cycle_finder(imports, cycle):
    given = [Import(f"cuda2neuron.{a}", f"cuda2neuron.{b}", 1) for a, b in imports]
    assert bool(module_cycles(given)) is cycle


def test_type_checking_imports_count():
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cuda2neuron.python import RuleContext\n")
    found = _imports("cuda2neuron.core._rule", ROOT / "cuda2neuron/core/_rule.py", tree)
    assert upward_imports(found) == ["cuda2neuron.core._rule:3 imports cuda2neuron.python (layer 1 from layer 0)"]


# -- only the CLI prints ----------------------------------------------------------------------------

def _printing(path: Path, tree: ast.AST) -> list[str]:
    found = []
    for node in _runtime_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"imports {n}" for n in names if n.split(".")[0] in PRINTING_LIBRARIES]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"line {node.lineno}: print()")
        elif isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr"):
            if isinstance(node.value, ast.Name) and node.value.id == "sys":
                found.append(f"line {node.lineno}: sys.{node.attr}")
    return found


# Code that runs in a process of its own, where stdout/stderr are the process's protocol with
# its parent or the user's program's own streams: not the CLI's output.
OWN_PROCESS = {
    "cuda2neuron.backend._sitecustomize.sitecustomize",  # loaded into `emulate`'s child program
    "cuda2neuron.validate._worker",  # the reference / port process: flushes the user's streams
    "cuda2neuron.validate._zygote_server",  # forks the runs: a run's last flush, before os._exit
}


def _printers() -> list[str]:
    out = []
    for package, path, module in _sources():
        if package == "cuda2neuron.cli" or module in TOP or module in OWN_PROCESS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out += [f"{module}: {what}" for what in _printing(path, tree)]
    return out


def test_only_the_cli_prints():
    assert _printers() == []
