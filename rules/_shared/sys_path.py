"""Folders a module puts on ``sys.path`` from paths built on its own ``__file__``.

unsloth's ``models/glm4_moe.py`` inserts ``dirname(dirname(abspath(__file__)))/kernels/moe`` and
then imports ``grouped_gemm``: the project's own Triton grouped GEMM in that folder, not the
third-party CUTLASS package of the same name, which is what CN616 named it (9 findings that said
CUTLASS). Python finds an inserted folder before site-packages, so an import whose first name is
a package in that folder is the project's (``kernels.local_kernel_package``).

Only paths computed from ``__file__`` are followed (``os.path.dirname/abspath/realpath/normpath/
join``, ``pathlib.Path`` with ``.parent``, ``.parents[n]``, ``.resolve()`` and ``/``, a name bound
once to such a path): a folder from the environment or the command line is unknown here, and an
unknown folder shadows nothing.
"""

from __future__ import annotations

import ast
from pathlib import PurePath

from cuda2neuron.core import kept_tree

__all__ = ["source_sys_path_folders", "sys_path_folders"]

_SAME = frozenset({"abspath", "realpath", "normpath", "fspath", "expanduser"})
_SAME_METHODS = frozenset({"resolve", "absolute", "expanduser"})
_PATH_TYPES = frozenset({"Path", "PurePath", "PosixPath", "PurePosixPath"})
_DEPTH = 8  # names bound to names: a chain longer than this is not followed


def sys_path_folders(tree: ast.Module, path: str, text: str) -> tuple[tuple[str, ...], ...]:
    """The folders (as path parts, from the file's own parts) that the module at ``path``
    inserts into or appends to ``sys.path``, where each is computed from ``__file__``."""
    if "sys.path" not in text:
        return ()
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _adds_to_sys_path(n.func)]
    if not calls:
        return ()
    bound: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            bound.setdefault(node.target.id, []).extend([node.value] if node.value is not None else [])
            bound[node.target.id].append(node.target)  # two bindings: not followed
    file = PurePath(path).parts
    out = []
    for call in calls:
        arg = call.args[-1] if call.args else None
        folder = _value(arg, file, bound, 0) if arg is not None else None
        if folder:
            out.append(folder)
    return tuple(out)


def source_sys_path_folders(text: str, path: str) -> tuple[tuple[str, ...], ...]:
    """``sys_path_folders`` of a module's text, for a libcst visitor: parsed by CPython only where
    the text names ``sys.path`` (a file that cannot be parsed so has none)."""
    if "sys.path" not in text:
        return ()
    try:
        tree = kept_tree(text) or ast.parse(text)
    except (SyntaxError, ValueError):
        return ()
    return sys_path_folders(tree, path, text)


def _adds_to_sys_path(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("insert", "append")
        and isinstance(func.value, ast.Attribute)
        and func.value.attr == "path"
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "sys"
    )


def _value(node: ast.expr, file: tuple[str, ...], bound: dict[str, list[ast.expr]], depth: int) -> tuple[str, ...] | None:
    """``node`` as path parts when it is a path built on ``__file__``; None otherwise."""
    if depth > _DEPTH:
        return None
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return file
        values = bound.get(node.id, [])
        return _value(values[0], file, bound, depth + 1) if len(values) == 1 else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = _value(node.value, file, bound, depth + 1)
        return base[:-1] if base else None
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        base = _value(node.value.value, file, bound, depth + 1)
        index = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if base and isinstance(index, int) and 0 <= index < len(base) - 1:
            return base[: len(base) - 1 - index]
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _joined(_value(node.left, file, bound, depth + 1), [node.right])
    if not isinstance(node, ast.Call) or not node.args and not isinstance(node.func, ast.Attribute):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id if isinstance(node.func, ast.Name) else None
    if isinstance(node.func, ast.Attribute) and name in _SAME_METHODS and not node.args:
        return _value(node.func.value, file, bound, depth + 1)  # Path(__file__).resolve()
    if not node.args:
        return None
    first = _value(node.args[0], file, bound, depth + 1)
    if name == "dirname" and len(node.args) == 1:
        return first[:-1] if first else None
    if (name in _SAME or name in _PATH_TYPES or name == "str") and len(node.args) == 1:
        return first
    if name == "join" or name in _PATH_TYPES:
        return _joined(first, node.args[1:])
    return None


def _joined(base: tuple[str, ...] | None, rest: list[ast.expr]) -> tuple[str, ...] | None:
    """``base`` joined with string constants (``"kernels", "moe"``, ``"../ops"``)."""
    if not base:
        return None
    parts = list(base)
    for piece in rest:
        if not isinstance(piece, ast.Constant) or not isinstance(piece.value, str) or piece.value.startswith(("/", "~")):
            return None
        for part in piece.value.replace("\\", "/").split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if len(parts) <= 1:
                    return None
                parts.pop()
            else:
                parts.append(part)
    return tuple(parts)
