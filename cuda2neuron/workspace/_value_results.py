"""Device values a function hands back through its return, and the callers' tests that stay.

A trainer's ``--device`` option (``default="cuda"``) is read in another module by a function
that builds the device and returns it: ``def init_device(args): ...; device =
torch.device(args.device); return device``. The script then tests the answer, ``device =
init_device(args)`` and ``if device.type in ("cuda",) and amp_dtype == torch.float16:
loss_scaler = Scaler(device=device.type)``. That test guards code (a scaler class of the
project's own), so CN103 leaves it in every run; the default moved alone makes the port take the
other branch on Trainium (fp16 training loses its loss scaler) where the original took this one
on the GPU. Nothing in the option's file says the value comes back: the project sweep records it
(``ProjectFacts.returned_options``), and CN102 keeps the default with the test
(``rules/_shared/returned_values.py``), naming it by ``file:line``.

* **Returns.** A top-level function whose ``return`` is built from a parameter: the parameter
  itself (a device word: ``device``), a parsed namespace's device attribute (``args.device``,
  ``getattr(args, "device", ...)``), through ``torch.device(...)`` / ``str(...)`` and names the
  function binds once (``device = torch.device(args.device); return device``); one element of a
  returned tuple counts as itself. Found from the text first (``may_return_values``: a
  ``return`` of a device-named value). A namespace attribute the function stores back
  (``args.device = result["device"]``) is read as the same device: the trap is timm's helper
  that rewrites it with the index it picked, keeping the device's type.
* **Tests on the answer.** In the callers (files that spell the function's name before a
  ``(``), a name bound to the call (``device = f(args)``, ``device, rank = f(args)``) and then
  compared with "cuda" (``device.type == "cuda"``, ``device.type in ("cuda",)``, ``"cuda" in
  str(device)``, ``.startswith("cuda")``) in an ``if`` / ``while`` / conditional of the same
  function whose branches call code: CN103's reading of a guard (``_CallKinds``: data moves,
  raises and skips are no code; torch calls only make its fix unsafe, anything else leaves it to
  a person).
* **The option.** Where the namespace handed to the function is a plain name (``args``), the
  row is (the caller's module, the attribute, where the test stands, whether --unsafe-fixes moves
  it): the caller's module declares the option or is handed it, as ``_value_args``' rows.

Read with CPython's ``ast``, through the sweep's one parse per file; only files whose bytes
return a device-named value, then only callers that spell a recorded name and quote "cuda".
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ._library_sinks import spelled
from ._value_args import NAMESPACES
from ._value_readers import Source, _argument
from ._value_returns import _own_nodes
from ._walk import walked

__all__ = ["may_return_values", "returned_options"]

# A `return` of a device-named value, through `str(` (`torch.device(...)` is one), first or after
# plain names in a tuple (`return device`, `return torch.device(args.device)`, `return rank, device`).
# Not anchored at the line's start: the engine then skips to each literal `return` (a `^` anchor
# tried every line: 0.45 CPU-s over diffusers' 2,088 files); `_returned_lines` checks the line.
_RETURN = re.compile(rb"return[ \t(]+(?:[\w.]+[ \t]*,[ \t]*)*(?:str\([ \t]*)?(?:[A-Za-z_][\w.]*)?device\b")
# What a device value is built through on its way to the return.
_WRAPPERS = frozenset({"torch.device", "str"})
# How many names bound in the function a return is followed through (`d = ...; device = d`).
_DEPTH = 4


def may_return_values(data: bytes) -> bool:
    """Whether a file's bytes may return a device value (the sweep's cheap test, no parse)."""
    return b"device" in data and next(_returned_lines(data), None) is not None


def _returned_lines(data: bytes) -> Iterator[int]:
    """The lines (1-based) whose statement returns a device-named value."""
    for match in _RETURN.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        if not data[start : match.start()].strip(b" \t"):
            yield data.count(b"\n", 0, start) + 1


# (parameter, its position or None for keyword-only, the namespace's attribute or None, the
#  element of a returned tuple or None)
Handed = tuple[str, int | None, str | None, int | None]


def returned_options(
    sources: Iterable[Source],
    more: Callable[[list[str]], Iterable[Source]],
    bindings: Callable[[ast.Module, str, Path], dict[str, str]],
    parse: Callable[[Path, bytes], ast.Module | None],
) -> frozenset[tuple[str, str, str, bool]]:
    """(the caller's module, the option's attribute, where the test on the answer stands and what
    returned it, whether --unsafe-fixes moves that test) for each call of a function whose return
    is built from the namespace the caller hands it, where the caller tests the answer against
    "cuda" (see the module's text). ``more(words)``: the project's files that spell one of
    ``words`` before a ``(``; ``bindings`` / ``parse``: as ``_value_readers.selections``'."""
    returns: dict[str, tuple[str, list[Handed]]] = {}
    for path, module, shown, data in sources:
        tree = parse(path, data)
        if tree is None:
            continue  # the per-file run reports it
        lines = list(_returned_lines(data))
        for func in tree.body:
            # Only a function holding one of the return lines is walked.
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                func.lineno <= n <= (func.end_lineno or func.lineno) for n in lines
            ):
                handed, line = _handed_back(func)
                if handed:
                    returns[f"{module}.{func.name}"] = (f"{shown}:{line}", handed)
    if not returns:
        return frozenset()
    found: set[tuple[str, str, str, bool]] = set()
    for path, module, shown, data in more(sorted({n.rsplit(".", 1)[-1] for n in returns})):
        if b"'cuda" not in data and b'"cuda' not in data:
            continue
        tree = parse(path, data)
        if tree is None:
            continue
        bound = bindings(tree, module, path)
        bound.update({s.name: f"{module}.{s.name}" for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))})
        for scope in _scopes(tree):
            for name, call, function, element in _bound_answers(scope, bound, returns):
                where, handed = returns[function]
                for test, unsafe in _tests_on(scope, name, bound):
                    for parameter, position, attribute, index in handed:
                        if index != element or attribute is None:
                            continue
                        value = _argument(call, parameter, position)
                        if isinstance(value, ast.Name) and value.id in NAMESPACES:
                            what = f"{shown}:{test.lineno} (`{function.rsplit('.', 1)[-1]}()` builds it and returns it at {where})"
                            found.add((module, attribute, what, unsafe))
    return frozenset(found)


def _handed_back(func: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[Handed], int]:
    """What ``func``'s returns hand back of its parameters, and the first such return's line."""
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    parameters = {a: (positional.index(a) if a in positional else None) for a in (*positional, *(a.arg for a in func.args.kwonlyargs))}
    assigned: dict[str, list[ast.expr]] = {}
    returned: list[ast.Return] = []
    for node in _own_nodes(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, ast.Return) and node.value is not None:
            returned.append(node)
    once = {name: values[0] for name, values in assigned.items() if len(values) == 1 and name not in parameters}
    handed: list[Handed] = []
    line = 0
    for ret in sorted(returned, key=lambda r: r.lineno):
        elements = list(enumerate(ret.value.elts)) if isinstance(ret.value, ast.Tuple) else [(None, ret.value)]
        for index, value in elements:
            source = _source(value, parameters, once, _DEPTH)
            if source is not None:
                parameter, attribute = source
                handed.append((parameter, parameters[parameter], attribute, index))
                line = line or ret.lineno
    return handed, line


def _source(node: ast.expr, parameters: Mapping[str, int | None], once: Mapping[str, ast.expr], depth: int) -> tuple[str, str | None] | None:
    """(parameter, the namespace's attribute or None) ``node`` is built from; None otherwise."""
    from cuda2neuron.rules._shared.names import is_device_word

    if isinstance(node, ast.Call) and spelled(node.func) in _WRAPPERS and len(node.args) == 1:
        return _source(node.args[0], parameters, once, depth)
    if isinstance(node, ast.Call) and spelled(node.func) == "getattr" and len(node.args) >= 2:
        head, attr = node.args[0], node.args[1]
        if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
            node = ast.Attribute(value=head, attr=attr.value, ctx=ast.Load())
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        head = node.value.id
        if head in parameters and head in NAMESPACES and is_device_word(node.attr):
            return head, node.attr
        return None
    if isinstance(node, ast.Name):
        if node.id in parameters:
            return (node.id, None) if is_device_word(node.id) else None
        if node.id in once and depth > 0:
            return _source(once[node.id], parameters, once, depth - 1)
    return None


def _scopes(tree: ast.Module) -> Iterator[ast.AST]:
    """The module and every function in it (methods and nested functions included)."""
    yield tree
    for node in walked(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _bound_answers(
    scope: ast.AST, bound: Mapping[str, str], returns: Mapping[str, object]
) -> Iterator[tuple[str, ast.Call, str, int | None]]:
    """(name, the call, the function, the tuple element or None) for each ``name = f(...)`` /
    ``a, name = f(...)`` of ``scope`` whose ``f`` is a recorded function."""
    for node in _own_nodes(scope):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        name = spelled(node.value.func)
        if name is None:
            continue
        head, _, rest = name.partition(".")
        function = _known(f"{bound[head]}.{rest}".rstrip(".") if head in bound else None, returns)
        if function is None:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            yield target.id, node.value, function, None
        elif isinstance(target, ast.Tuple):
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Name):
                    yield element.id, node.value, function, index


def _known(dotted: str | None, returns: Mapping[str, object]) -> str | None:
    """The recorded function ``dotted`` names; a src layout's `src.pkg.f` is imported as `pkg.f`,
    a package re-exports `pkg.utils.f` as `pkg.f`."""
    if dotted is None:
        return None
    if dotted in returns:
        return dotted
    module, _, name = dotted.rpartition(".")
    for key in returns:
        if key.endswith("." + dotted) or (module and key.rpartition(".")[2] == name and key.startswith(module + ".")):
            return key
    return None


def _tests_on(scope: ast.AST, name: str, bound: Mapping[str, str]) -> Iterator[tuple[ast.expr, bool]]:
    """(the test, whether --unsafe-fixes moves it) for each ``if`` / ``while`` / conditional of
    ``scope`` that compares ``name`` with "cuda" and whose branches call code (CN103 leaves it in
    a safe run)."""
    for node in _own_nodes(scope):
        if isinstance(node, (ast.If, ast.While)):
            branches: list[ast.AST] = [*node.body, *node.orelse]
        elif isinstance(node, ast.IfExp):
            branches = [node.body, node.orelse]
        else:
            continue
        if not any(_compares(part, name) for part in _operands(node.test)):
            continue
        torch, other = _call_kinds(branches, bound)
        if torch or other:
            yield node.test, not other


def _operands(test: ast.expr) -> Iterator[ast.expr]:
    """The parts of ``and`` / ``or`` / ``not`` a test is built of."""
    if isinstance(test, ast.BoolOp):
        for value in test.values:
            yield from _operands(value)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _operands(test.operand)
    else:
        yield test


def _compares(test: ast.expr, name: str) -> bool:
    """``name.type == "cuda"``, ``name.type in ("cuda",)``, ``name == "cuda"``, ``"cuda" in
    str(name)``, ``name.type.startswith("cuda")`` and their negations."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr == "startswith":
        return _reads(test.func.value, name) and any(_cuda(a) for a in test.args)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    left, right = test.left, test.comparators[0]
    if _reads(left, name):
        values = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
        return any(_cuda(v) for v in values)
    return isinstance(test.ops[0], (ast.In, ast.NotIn)) and _cuda(left) and _reads(right, name)


def _reads(node: ast.expr, name: str) -> bool:
    """``name``, ``name.type``, ``str(name)``."""
    if isinstance(node, ast.Call) and spelled(node.func) == "str" and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, ast.Attribute) and node.attr == "type":
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


def _cuda(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def _call_kinds(branches: list[ast.AST], bound: Mapping[str, str]) -> tuple[bool, bool]:
    """(a torch call, any other call) under a guard, read as CN103's ``_CallKinds`` reads it:
    data moves, raises of builtin exceptions and skips are no code."""
    from cuda2neuron.rules.device._helpers import _BUILTIN_EXCEPTIONS, _DATA_METHODS, _SKIPS

    torch = other = False
    for branch in branches:
        for call in (n for n in walked(branch) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in _DATA_METHODS:
                continue
            name = spelled(func)
            head, _, rest = (name or "").partition(".")
            qualified = f"{bound[head]}.{rest}".rstrip(".") if head in bound else None
            if isinstance(func, ast.Name) and qualified is None and func.id in _BUILTIN_EXCEPTIONS:
                continue
            if qualified in _SKIPS:
                continue
            if qualified is not None and qualified.startswith("torch.") and "cpp_extension" not in qualified:
                torch = True
            else:
                other = True
    return torch, other

