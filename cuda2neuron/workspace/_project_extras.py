"""The project's own extras that pull CUDA-only packages, read from its setup.py and pyproject.toml.

llm-foundry's launch configs install the project as ``pip_install: .[gpu]``: no CUDA word on the
line, but its setup.py builds ``extra_deps['gpu'] = copy.deepcopy(extra_deps['gpu-flash2'])``, and
that extra is ``['flash-attn==2.7.4.post1']``. The install fails on a Trainium host (flash-attn
builds against the CUDA toolkit), so the rules that read installs (CN713) report the extra by what
it pulls: ``ProjectFacts.cuda_extras``.

Only what can be read without running anything counts: in setup.py a dict display handed to
``setup(extras_require=...)``, or a name bound to one and filled by ``NAME["extra"] = [...]``
(lists, tuples and sets of strings, a copy of another extra: ``copy.deepcopy(NAME["x"])``,
``list(...)``, ``+``); in pyproject.toml ``[project.optional-dependencies]``, where an extra may
name another of the same project (``all = ["pkg[gpu]"]``). An extra built by a comprehension over
the others is unknown and not reported.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from ._walk import walked

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["cuda_extras"]

_EXTRA_REF = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*\[([^\]]+)\]")


def cuda_extras(setups: Iterable[tuple[Path, bytes]], roots: Iterable[Path]) -> frozenset[tuple[str, str, str, str]]:
    """(distribution, extra, CUDA-only package, where) for each extra that pulls a CUDA-only
    package, of the setup.py files ``setups`` (as the sweep read them) and of the pyproject.toml
    at each of ``roots``; names normalised (PEP 503)."""
    found = [_setup_py(data) for _, data in setups]
    found += [_pyproject(root / "pyproject.toml") for root in roots]
    out: set[tuple[str, str, str, str]] = set()
    if not any(extras for _, extras, _ in found):
        return frozenset(out)  # most projects: the package table stays unloaded
    from cuda2neuron.documents.requirements import normalise, requirement_name
    from cuda2neuron.rules.files.deps._helpers import cuda_only_package

    for name, extras, where in found:
        if not extras:
            continue
        dist = normalise(name) if name else ""
        resolved = {normalise(k): v for k, v in extras.items()}
        for extra, requirements in resolved.items():
            for spec, line in _expanded(requirements, resolved, dist, normalise):
                package = requirement_name(spec)
                if package and cuda_only_package(normalise(package)) is not None:
                    out.add((dist, extra, normalise(package), f"{where}:{line}" if line else where))
                    break
    return frozenset(out)


def _expanded(requirements, extras, dist, normalise, depth: int = 0):  # noqa: ANN001, ANN202 - small helper
    """Each (requirement, line) of an extra, with the extras of the same project it names
    (``pkg[gpu]``) expanded."""
    for spec, line in requirements:
        m = _EXTRA_REF.match(spec)
        if m and dist and normalise(m.group(1)) == dist and depth < 4:
            for extra in m.group(2).split(","):
                yield from _expanded(extras.get(normalise(extra.strip()), ()), extras, dist, normalise, depth + 1)
        else:
            yield spec, line


def _pyproject(path: Path) -> tuple[str, dict[str, list[tuple[str, int]]], str]:
    if not path.is_file():
        return "", {}, ""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return "", {}, ""
    if "optional-dependencies" not in text:
        return "", {}, ""
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError:
        return "", {}, ""  # the file's own rules report it
    table = project.get("optional-dependencies", {}) if isinstance(project, dict) else {}
    if not isinstance(table, dict):
        return "", {}, ""
    lines = text.splitlines()
    extras = {}
    for extra, specs in table.items():
        if isinstance(specs, list):
            extras[extra] = [(s, _line_of(lines, s)) for s in specs if isinstance(s, str)]
    name = project.get("name", "")
    return name if isinstance(name, str) else "", extras, path.name


def _line_of(lines: list[str], spec: str) -> int:
    return next((i for i, line in enumerate(lines, 1) if f'"{spec}"' in line or f"'{spec}'" in line), 0)


def _setup_py(data: bytes) -> tuple[str, dict[str, list[tuple[str, int]]], str]:
    if b"extras_require" not in data:
        return "", {}, ""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return "", {}, ""
    setup = next(
        (n for n in walked(tree) if isinstance(n, ast.Call) and any(k.arg == "extras_require" for k in n.keywords)),
        None,
    )
    if setup is None:
        return "", {}, ""
    bound: dict[str, list[ast.expr]] = {}
    items: dict[str, dict[str, ast.expr]] = {}  # NAME -> {"extra": value} from NAME["extra"] = value
    for node in walked(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            bound.setdefault(target.id, []).append(node.value)
        elif (
            isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
            and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)
        ):
            items.setdefault(target.value.id, {})[target.slice.value] = node.value
    keywords = {k.arg: k.value for k in setup.keywords if k.arg}
    value = keywords["extras_require"]
    table: dict[str, ast.expr] = {}
    if isinstance(value, ast.Name) and len(bound.get(value.id, [])) == 1:
        first = bound[value.id][0]
        if isinstance(first, ast.Dict):
            table.update(_dict_items(first))
        table.update(items.get(value.id, {}))
        holder = value.id
    elif isinstance(value, ast.Dict):
        table.update(_dict_items(value))
        holder = ""
    else:
        return "", {}, ""
    extras = {}
    for extra, expr in table.items():
        specs = _strings(expr, table, holder, 0)
        if specs is not None:
            extras[extra] = specs
    name = keywords.get("name")
    if isinstance(name, ast.Name) and len(bound.get(name.id, [])) == 1:
        name = bound[name.id][0]
    dist = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else ""
    return dist, extras, "setup.py"


def _dict_items(node: ast.Dict) -> dict[str, ast.expr]:
    return {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)}


def _strings(node: ast.expr, table: dict[str, ast.expr], holder: str, depth: int) -> list[tuple[str, int]] | None:
    """The requirement strings ``node`` holds, with their lines; None where it is not plain data."""
    if depth > 4:
        return None
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = []
        for e in node.elts:
            if not isinstance(e, ast.Constant) or not isinstance(e.value, str):
                return None
            out.append((e.value, e.lineno))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _strings(node.left, table, holder, depth + 1), _strings(node.right, table, holder, depth + 1)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        # copy.deepcopy(extra_deps["gpu-flash2"]), list(...), sorted(...)
        func = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else ""
        if func in ("deepcopy", "copy", "list", "tuple", "set", "sorted"):
            return _strings(node.args[0], table, holder, depth + 1)
        return None
    if (
        isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == holder
        and isinstance(node.slice, ast.Constant) and node.slice.value in table
    ):
        return _strings(table[node.slice.value], table, holder, depth + 1)
    return None
