"""Calls whose result a module treats as a text: it searches that result for words no mapping of
environment variables can hold as a key.

unsloth's crash-message tests bind ``message = self._message(monkeypatch, "vulkan")`` and assert
``"UNSLOTH_LLAMA_CPP_BACKEND=cpu" in message``: a key never holds ``=``, so what ``_message``
returns is a text, and ``"CUDA_VISIBLE_DEVICES" not in message`` in the test beside it looks for
a word in that text, reads no environment (CN405 and the residual pass reported it). The calls
are told apart by their last name (``_message``), within one module; a name bound more than once
in its function may hold anything and proves nothing.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

__all__ = ["once_bound_calls", "text_callees", "text_callees_of_source"]

# What no environment variable's name holds: `=` (it ends the name in `NAME=value`) and blanks.
# A word with one is a text's; a path or a CUDA word alone (`"/proc/driver/nvidia" in found`)
# proves nothing, since a list of paths or names is searched the same way.
_NOT_A_KEY = re.compile(r"[=\s]")


def once_bound_calls(body: list[ast.stmt]) -> dict[str, str]:
    """The names ``body`` binds exactly once, to a call, with the callee's last name
    (``message = self._message(...)`` gives ``{"message": "_message"}``)."""
    bound: dict[str, int] = {}
    calls: dict[str, str] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
            if (
                isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call)
            ):
                func = node.value.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                if name is not None:
                    calls[node.targets[0].id] = name
    return {n: c for n, c in calls.items() if bound.get(n) == 1}


def text_callees(tree: ast.Module) -> frozenset[str]:
    """The last names of the calls whose result some function of ``tree``, having bound it once
    to a name, searches with ``in`` / ``not in`` for a word no environment key can be (one
    holding ``=`` or a blank)."""
    out: set[str] = set()
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        calls: dict[str, str] | None = None
        for node in ast.walk(func):
            if not (
                isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn))
                and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
                and _NOT_A_KEY.search(node.left.value) is not None and isinstance(node.comparators[0], ast.Name)
            ):
                continue
            if calls is None:
                calls = once_bound_calls(func.body)
            callee = calls.get(node.comparators[0].id)
            if callee is not None:
                out.add(callee)
    return frozenset(out)


@lru_cache(maxsize=4)
def text_callees_of_source(source: str) -> frozenset[str]:
    """``text_callees`` of a module's text (a libcst rule's file); none where it does not parse.
    Kept by text, not by tree: a cached tree would stay alive for the collector to scan."""
    try:
        return text_callees(ast.parse(source))
    except (SyntaxError, ValueError):
        return frozenset()
