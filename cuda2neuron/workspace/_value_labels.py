"""A "cuda" that names a bookkeeping slot, handed to a method whose test picks the slot.

ColossalAI's memory statistics keep one list per device kind and answer for one of them:
``def non_model_data_list(self, device_type): if device_type == "cuda": return
self._non_model_data_cuda_list elif device_type == "cpu": ... else: raise TypeError``. The chain
only answers (no call in a branch), so CN103 moves its test safely to "neuron" -- right where
the callers' "cuda" moves with it. Here they hand it positionally through methods of objects
whose type no rule knows (``self._memstats.non_model_data_list("cuda")``, or
``next_period_non_model_data_usage("cuda")`` that hands its parameter on): CN109 leaves such a
literal to a person, and the moved test then raises ``TypeError`` on the default path. So the
sweep records each such reader with the caller that hands it a "cuda" the port leaves, and CN103
keeps the test (``rules/_shared/label_readers.py``): the word is a label of the program's own,
on both sides of the call.

The reader is a top-level function or a method of a top-level class; its callers are matched by
the last name (``.non_model_data_list(``, any receiver: a report where a rewrite might have done,
never the reverse), a method's position counted without ``self``. A parameter handed on is
followed up to ``_HOPS`` calls. Read with CPython's ``ast``, only files ``may_read_devices``
admits, then only files that spell a found name before a ``(``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator

from ._value_readers import Source, _device_test, _parameters, raising_chains
from ._walk import walked

__all__ = ["label_readers"]

_HOPS = 3


def label_readers(
    sources: Iterable[Source],
    more: Callable[[list[str]], Iterable[Source]],
    parse: Callable[..., ast.Module | None],
) -> frozenset[tuple[str, str, int | None, str, str]]:
    """(function, parameter, its position without ``self``, where the reader's test stands,
    where a caller hands "cuda") for each plain-answer reader (see the module's text) and each
    function that hands it a parameter of its own, when some caller hands the chain a "cuda"
    literal. ``function`` is dotted: ``module.Class.method`` or ``module.function``."""
    # name -> [(reader, parameter's position counted without `self`, is a method, where)]
    wanted: dict[str, list[tuple[str, str, int | None, bool, str]]] = {}
    for path, module, shown, data in sources:
        tree = parse(path, data)
        for func, owner in _functions(tree.body if tree is not None else []):
            found = _plain_chain(func)
            if found is None:
                continue
            name, line = found
            positional, _ = _parameters(func.args)
            method = owner is not None
            position = positional.index(name) - (1 if method else 0) if name in positional else None
            dotted = f"{module}.{owner}.{func.name}" if method else f"{module}.{func.name}"
            wanted.setdefault(func.name, []).append((dotted, name, position, method, f"{shown}:{line}"))
    if not wanted:
        return frozenset()
    rows: dict[tuple[str, str], tuple[int | None, str, str | None]] = {
        (dotted, parameter): (position, where, None) for rows_ in wanted.values() for dotted, parameter, position, _, where in rows_
    }
    # Each row here is (the function the value reaches, its parameter, position, is a method,
    # where the reader's test stands); a hop's row names the hop, so that CN102 keeps a literal
    # handed to it too.
    todo = {name: [(d, p, pos, meth, w) for d, p, pos, meth, w in found] for name, found in wanted.items()}
    callers: dict[str, str] = {}  # where the test stands -> the first caller handing "cuda"
    for _ in range(_HOPS):
        handed: dict[str, list[tuple[str, str, int | None, bool, str]]] = {}
        for path, module, shown, data in more(sorted(todo)):
            tree = parse(path, data)
            if tree is None:
                continue
            for func, owner in _functions(tree.body):
                for call in (n for n in walked(func) if isinstance(n, ast.Call)):
                    callee = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
                    for target, parameter, position, method, where in todo.get(callee or "", ()):
                        # `self.f(x)` / `obj.f(x)`: the position skips `self`; a bare `f(x)` is
                        # no call of a method.
                        if method and not isinstance(call.func, ast.Attribute):
                            continue
                        value = _argument(call, parameter, position)
                        if _label(value) and _unknown_receiver(call) and any(value is a for a in call.args):
                            callers.setdefault(where, f"{shown}:{call.lineno}")
                            continue
                        mine, _ = _parameters(func.args)
                        if isinstance(value, ast.Name) and value.id in mine and value.id != "self":
                            hop = f"{module}.{owner}.{func.name}" if owner is not None else f"{module}.{func.name}"
                            at = mine.index(value.id) - (1 if owner is not None else 0)
                            if (hop, value.id) not in rows:
                                rows[(hop, value.id)] = (at, where, target)
                                handed.setdefault(func.name, []).append((hop, value.id, at, owner is not None, where))
        if not handed:
            break
        todo = handed
    return frozenset(
        (dotted, parameter, position, where, callers[where])
        for (dotted, parameter), (position, where, _) in rows.items()
        if where in callers
    )


def _functions(body: list[ast.stmt]) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]]:
    """The top-level functions (owner None) and the methods of top-level classes (owner: the class)."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt, None
        elif isinstance(stmt, ast.ClassDef):
            for inner in stmt.body:
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield inner, stmt.name


def _plain_chain(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, int] | None:
    """(parameter, line of its "cuda" test) where an ``if`` / ``elif`` chain of ``func`` tests a
    parameter against "cuda", no test of the chain is true of "neuron", the last ``else`` raises,
    and no branch calls anything outside a ``raise`` (the chain CN103 moves: with a call in a
    branch it stays, and ``_value_readers.device_readers`` answers for it)."""
    positional, keywords = _parameters(func.args)
    parameters = set(positional) | set(keywords)
    for chain in raising_chains(func):
        tests = [_device_test(link.test) for link in chain]
        if any(t is None for t in tests):
            return None
        cuda = [(t[0], link) for link, t in zip(chain, tests) if t and any(v.startswith("cuda") for v in t[1])]
        if not cuda or any(any(v == "neuron" or "neuron".startswith(v) for v in t[1]) for t in tests if t):
            return None
        name = cuda[0][0]
        if name not in parameters:
            return None
        if any(isinstance(n, ast.Call) for link in chain for s in link.body if not isinstance(s, ast.Raise) for n in walked(s)):
            return None
        return name, cuda[0][1].test.lineno
    return None


def _argument(call: ast.Call, name: str, position: int | None) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if position is not None and 0 <= position < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
        return call.args[position]
    return None


def _unknown_receiver(call: ast.Call) -> bool:
    """``obj.f(...)`` / ``self._stats.f(...)``: a method of an object whose type the caller's file
    does not show. CN102 moves a literal handed positionally to a callee its file resolves (a
    function, ``self.f`` of the class around it, whose parameter is named as a device) and leaves
    this one (CN109): the chain reads "cuda" after the port only through such a call. A literal
    CN102 moves moves with the test (``_value_readers``: plain answers move with their callers)."""
    func = call.func
    return isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"))


def _label(value: ast.expr | None) -> bool:
    """A "cuda" literal handed at the call."""
    return isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.split(":")[0] == "cuda"
