"""Device facts that cross a call through a return, and the guards their callers build on them.

mmengine's ``def is_cuda_available() -> bool: return torch.cuda.is_available()`` is a device
test of its own: other modules call it, and behind its answer
``AmpOptimWrapper.__init__``'s ``assert is_cuda_available() or is_npu_available() ...`` admits
``scaler_type = GradScaler``, a ``from torch.cuda.amp import GradScaler`` that a safe run leaves
to a person (CN304: the CUDA branch of a conditional import). Moved alone, the return answers for
neuron and the port reaches that CUDA code on Trainium, where the original stopped at the assert.
The rule's file holds only the return; the guard and the sink are in another module, so the
project sweep records them:

* **Returns.** A top-level function whose ``return`` reads ``torch.cuda.is_available()`` or
  ``torch.cuda.device_count()`` (the answer the port would flip), found from the text first
  (``may_return_devices``).
* **Guards on the answer.** The project's calls of such a function in an ``if`` / ``elif`` /
  ``while`` / conditional test, or an ``assert``: the code they open is the branch (the ``else``
  and what follows an early exit under ``not``), or what follows the assert in its function.
* **A sink in that code.** A name the sweep knows reaches CUDA-only code (``sink_names``), or a
  ``torch.cuda`` name the port leaves as CUDA (``cuda_left``: no safe move of its own, or bound
  by an import in one branch of a conditional, as mmengine's).

CN201 / CN103 / CN104 ask ``ProjectFacts.guarded_return`` before they move a test in such a
return (``rules/_shared/kernel_gates.py``): the answer keeps its meaning, and the finding names
the guard and the sink by ``file:line``. Read with CPython's ``ast``, only files whose bytes hold
a return of the fact, then only files that spell a recorded function's name before a ``(``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from ._library_sinks import spelled
from ._value_readers import Source
from ._walk import walked

__all__ = ["cuda_left", "device_returns", "may_return_devices"]

# The answers a return hands on: the port's CN201 moves both to torch.neuron.
FACTS = frozenset({"torch.cuda.is_available", "torch.cuda.device_count"})
# The fact's call; a return is then looked for before it on its line (one search of the bytes:
# two `in` tests and a line-anchored pattern were 0.065 CPU-s over diffusers' 2,088 files).
_FACT_CALL = re.compile(rb"cuda\.(?:is_available|device_count)\(")


def may_return_devices(data: bytes) -> bool:
    """Whether a file's bytes may return a device fact (the sweep's cheap test, no parse)."""
    for match in _FACT_CALL.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        if data[start : match.start()].lstrip().startswith(b"return"):
            return True
    return False


def device_returns(
    sources: Iterable[Source],
    more: Callable[[list[str]], Iterable[Source]],
    bindings: Callable[[ast.Module, str, Path], dict[str, str]],
    sink: Callable[[str], str | None],
    cuda_left: Callable[[str], bool],
    parse: Callable[[Path, bytes], ast.Module | None],
) -> frozenset[tuple[str, str, str]]:
    """(function, where its return stands, the guard and the sink it fronts) for each top-level
    function whose return is a device fact and whose answer a caller tests in front of CUDA-only
    code (see the module's text). ``more(words)``: the project's files that spell one of
    ``words`` before a ``(``; ``sink(dotted)``: what CUDA-only code a name reaches, or None;
    ``cuda_left(dotted)``: whether the port leaves that ``torch.cuda`` name as it is;
    ``bindings`` / ``parse``: as ``_value_readers.selections``'."""
    returns: dict[str, str] = {}
    for path, module, shown, data in sources:
        tree = parse(path, data)
        if tree is None:
            continue  # the per-file run reports it
        bound = bindings(tree, module, path)
        for func in tree.body:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                line = _fact_returned(func, bound)
                if line is not None:
                    returns[f"{module}.{func.name}"] = f"{shown}:{line}"
    if not returns:
        return frozenset()
    found: dict[str, tuple[str, str]] = {}
    for path, module, shown, data in more(sorted({n.rsplit(".", 1)[-1] for n in returns})):
        tree = parse(path, data)
        if tree is None:
            continue
        bound = bindings(tree, module, path)
        bound.update({s.name: f"{module}.{s.name}" for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))})
        branches = _branch_bindings(tree, bound)

        def answer_of(node: ast.AST) -> str | None:
            name = spelled(node.func) if isinstance(node, ast.Call) else None
            if name is None:
                return None
            head, _, rest = name.partition(".")
            dotted = f"{bound[head]}.{rest}".rstrip(".") if head in bound else None
            return _suffix(dotted, returns)

        def resolved(node: ast.AST) -> list[str]:
            name = spelled(node)
            if name is None:
                return []
            head, _, rest = name.partition(".")
            heads = branches.get(head) or ([bound[head]] if head in bound else [])
            return [f"{h}.{rest}".rstrip(".") for h in heads]

        for test, opened in _guards(tree.body):
            called = [c for c in walked(test) if isinstance(c, ast.Call) and answer_of(c) is not None]
            if not called:
                continue
            function = answer_of(called[0])
            if function in found:
                continue
            hit = _sink_in(opened, resolved, sink, cuda_left, {h for h, alts in branches.items() if len(alts) > 1})
            if hit is not None:
                line, what = hit
                found[function] = (returns[function], f"{what} at {shown}:{line} (the test at {shown}:{test.lineno})")
        for func, setting in _cuda_builds(tree.body):
            asked = next((c for c in walked(func) if isinstance(c, ast.Call) and answer_of(c) is not None), None)
            if asked is None or (function := answer_of(asked)) in found or function is None:
                continue
            found[function] = (returns[function], f"the CUDA extension build `{func.name}` at {shown}:{func.lineno}, which sets "
                               f"`TORCH_CUDA_ARCH_LIST` at {shown}:{setting} (the call at {shown}:{asked.lineno})")
    return frozenset((dotted, where, guard) for dotted, (where, guard) in found.items())


# The variable torch's `cpp_extension` reads for the GPU architectures to compile CUDA sources
# for: a function that sets it configures a CUDA extension build, whatever else it does.
_ARCH_LIST = "TORCH_CUDA_ARCH_LIST"


def _cuda_builds(body: list[ast.stmt]) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, int]]:
    """(function, line of the setting) for each top-level function that sets
    ``TORCH_CUDA_ARCH_LIST`` in an environment (``os.environ["TORCH_CUDA_ARCH_LIST"] = ...``,
    ``env.setdefault("TORCH_CUDA_ARCH_LIST", ...)``). ColossalAI's ``set_cuda_arch_list`` asks
    ``check_cuda_availability()`` (a return of ``torch.cuda.is_available()``) whether to
    cross-compile for a list of GPU architectures: the question is about the CUDA build, which
    runs the same on a Trainium host before and after the port, so the answer must not become
    Neuron's (it then skips the list, and nvcc builds for no architecture it was told of)."""
    for func in body:
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(func):
            key = None
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                key = next((t.slice for t in targets if isinstance(t, ast.Subscript)), None)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("setdefault", "update", "__setitem__") and node.args:
                key = node.args[0]
            if isinstance(key, ast.Constant) and key.value == _ARCH_LIST:
                yield func, node.lineno
                break


# torch.cuda names other rules than CN201 port safely in a plain statement: amp (CN301, CN304,
# CN306, CN307).
_AMP_PORTED = frozenset({
    "torch.cuda.amp", "torch.cuda.amp.autocast", "torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.custom_fwd", "torch.cuda.amp.custom_bwd", "torch.cuda.is_autocast_enabled",
    "torch.cuda.get_autocast_gpu_dtype", "torch.cuda.set_autocast_enabled",
})


def cuda_left(dotted: str) -> bool:
    """Whether the port leaves ``dotted`` (a ``torch.cuda`` name) as CUDA: no row of CN201's move
    table and no amp rule ports it (CN211 / CN202 report it for a person)."""
    return dotted not in _AMP_PORTED and dotted not in _moved()


@functools.cache
def _moved() -> frozenset[str]:
    """CN201's moves, read once per process; imported only when a return's guard opens
    ``torch.cuda`` code (a run over files no rule wakes imports no rule)."""
    from cuda2neuron.rules.cuda_api._helpers import load_moves

    return frozenset(load_moves())


def _fact_returned(func: ast.FunctionDef | ast.AsyncFunctionDef, bound: Mapping[str, str]) -> int | None:
    """The line of ``func``'s first return that reads a device fact (not a nested function's)."""
    for node in _own_nodes(func):
        if isinstance(node, ast.Return) and node.value is not None:
            for call in walked(node.value):
                if isinstance(call, ast.Call) and _resolve(spelled(call.func), bound) in FACTS:
                    return node.lineno
    return None


def _own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _resolve(name: str | None, bound: Mapping[str, str]) -> str | None:
    if name is None:
        return None
    head, _, rest = name.partition(".")
    return f"{bound.get(head, head)}.{rest}".rstrip(".")


def _suffix(dotted: str | None, known: Mapping[str, str]) -> str | None:
    """The key of ``known`` ``dotted`` names: itself, a src layout's `src.pkg.f` imported as
    `pkg.f`, or a package's re-export (mmengine's `from mmengine.device import
    is_cuda_available`, defined in `mmengine.device.utils`)."""
    if dotted is None:
        return None
    if dotted in known:
        return dotted
    module, _, name = dotted.rpartition(".")
    for key in known:
        if key.endswith("." + dotted):
            return key
        if module and key.rpartition(".")[2] == name and (key.startswith(module + ".") or f".{module}." in key):
            return key
    return None


def _branch_bindings(tree: ast.Module, bound: Mapping[str, str]) -> dict[str, list[str]]:
    """Names the module's top-level ``if`` / ``try`` bind by absolute imports, with every
    alternative (``if npu: from torch.npu.amp import GradScaler else: from torch.cuda.amp
    import GradScaler``): the plain bindings keep the last one only."""
    found: dict[str, list[str]] = {}
    for stmt in tree.body:
        if not isinstance(stmt, (ast.If, ast.Try)):
            continue
        for node in walked(stmt):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    found.setdefault(alias.asname or alias.name, []).append(f"{node.module}.{alias.name}")
    return found


def _guards(body: list[ast.stmt]) -> Iterator[tuple[ast.expr, list[ast.AST]]]:
    """(test, the code it opens when true) for every ``if`` / ``while`` / ``assert`` /
    conditional expression in ``body`` at any depth. Under ``not`` an ``if`` opens its ``else``,
    and what follows it when its body leaves (``if not ok(): raise``)."""
    for at, stmt in enumerate(body):
        if isinstance(stmt, ast.Assert):
            yield stmt.test, list(body[at + 1 :])
        elif isinstance(stmt, (ast.If, ast.While)):
            if _negated(stmt.test):
                rest = list(body[at + 1 :]) if stmt.body and isinstance(stmt.body[-1], (ast.Return, ast.Raise)) else []
                yield stmt.test, [*stmt.orelse, *rest]
            else:
                yield stmt.test, list(stmt.body)
        for node in _expressions(stmt):
            if isinstance(node, ast.IfExp):
                yield node.test, [node.orelse if _negated(node.test) else node.body]
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield from _guards(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from _guards(handler.body)


def _expressions(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of ``stmt`` itself, not those of the statements in its blocks."""
    for child in ast.iter_child_nodes(stmt):
        if not isinstance(child, (ast.stmt, ast.excepthandler)):
            yield from walked(child)


def _negated(test: ast.expr) -> bool:
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)


def _sink_in(
    opened: list[ast.AST],
    resolved: Callable[[ast.AST], list[str]],
    sink: Callable[[str], str | None],
    cuda_left: Callable[[str], bool],
    alternatives: set[str],
) -> tuple[int, str] | None:
    """The first name of ``opened`` that is CUDA-only code: (its line, what it is)."""
    for part in opened:
        inner: set[int] = set()  # `torch.cuda` inside `torch.cuda.amp.GradScaler`: the chain counts once
        for node in walked(part):
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
            if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in inner or isinstance(node.ctx, ast.Store):
                continue
            shown = spelled(node) or ""
            named = f"`{shown}`" if shown else "a name"
            for dotted in resolved(node):
                also = "" if dotted == shown else f" (`{dotted}`)"
                reached = sink(dotted)
                if reached is not None:
                    return node.lineno, f"{named}, which reaches {reached},"
                if dotted.startswith("torch.cuda.") and dotted not in FACTS:
                    if shown.split(".")[0] in alternatives:
                        return node.lineno, f"{named}{also}, bound in one branch of a conditional import and left to a person,"
                    if cuda_left(dotted):
                        return node.lineno, f"{named}{also}, which the port leaves as CUDA,"
    return None
