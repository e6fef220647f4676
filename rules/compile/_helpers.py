"""Helpers of the torch.compile family (CN5xx).

Two callables compile a model with inductor by default: ``torch.compile(m, ...)`` and the
method ``nn.Module.compile(...)`` (``model.compile(dynamic=False)``), which passes its keywords
on to ``torch.compile``. The method is recognised by the shape of the call, since the receiver's
type is unknown: ``X.compile(...)`` where ``X`` is no imported module (``re.compile``,
``jax.jit``-style APIs resolve through their import), every argument is a keyword of
``torch.compile`` (keras' ``model.compile(optimizer=..., loss=...)`` is not), and the file
imports torch and no other framework with a ``Model.compile`` of its own, and it defines no
``compile`` function or method itself.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import libcst as cst

from cuda2neuron.core import WORD_BYTES, Finding, Rule, Settings

from .._shared.blocks import statements
from .._shared.detector import AstDetector
from .._shared.names import call_qualname
from .._shared.packages import in_package

__all__ = [
    "COMPILE_KEYWORDS", "CUDA_MODES", "compile_callee", "compile_gate", "has_star_kwargs", "is_compile_call",
    "is_torch_compile", "wakes_on_compile",
]  # fmt: skip

# torch.compile's modes that only CUDA gives a meaning (CN502's words).
CUDA_MODES = ("max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead")

# The keywords of torch.compile after the model (what nn.Module.compile forwards), as torch 2.13's
# signature has them: `name`, `recompile_limit`, `isolate_recompiles` and `shapes_spec` are new there
# (AWS's compile reference links the 2.13 docs); without them `model.compile(name="enc")` read as
# some other framework's compile.
COMPILE_KEYWORDS = frozenset(
    {"fullgraph", "dynamic", "backend", "mode", "options", "name", "disable", "recompile_limit", "isolate_recompiles", "shapes_spec"}
)
# Frameworks whose models have a compile() method of their own (keras' takes an optimizer and
# a loss; a file that imports one of them is not read as calling nn.Module.compile).
_OTHER_COMPILES = frozenset({"keras", "tensorflow", "tf_keras", "jax", "flax", "mlx", "paddle"})


# The whole word `compile`: the pattern starts with the word (a literal the engine skips to) and
# the byte before it is read back by hand; a leading ``\b`` made the engine try every byte
# (diffusers: 0.4 s of the wake step, ten times the search).
_COMPILE_WORD = re.compile(rb"compile\b")
# `re.compile(r"...")`: a bare name's compile called with a string first. Neither torch.compile
# (unless the name is torch, or bound by `... as NAME`) nor nn.Module.compile (keywords only).
# The pattern starts at the dot (a literal the engine skips to); the name before it is read
# back by hand: a look-behind and ``(\w+)`` first made the engine try every byte.
_STRING_COMPILE = re.compile(rb"\.compile\(\s*[rRbBuUfF]{0,2}['\"]")


def _receiver(code: bytes, dot: int) -> bytes | None:
    """The bare name before ``.compile`` at ``dot`` (not an attribute: ``a.re.compile``)."""
    start = dot
    while start > 0 and code[start - 1] in WORD_BYTES:
        start -= 1
    if start == dot or (start > 0 and code[start - 1] == 0x2E):  # "."
        return None
    return code[start:dot]


def wakes_on_compile(cls: type[Rule], code: bytes) -> bool:  # noqa: ARG001 - a classmethod's cls
    """The compile family's ``wakes``: the whole word ``compile`` other than in
    ``re.compile("...")`` / ``re.compile(rf"...")`` (``is_compiled_module`` and regular
    expressions are what a model library's files hold) and at the edge of a string
    (``choices=["eager", "compile"]``), or ``_inductor``."""
    if b"_inductor" in code:
        return True
    bound: dict[bytes, bool] = {}  # one search of the file per receiver name, not per call
    skip = set()
    for m in _STRING_COMPILE.finditer(code):
        name = _receiver(code, m.start())
        if name is None or name == b"torch":
            continue
        aliased = bound.get(name)
        if aliased is None:
            aliased = bound[name] = re.search(rb"\bas\s+" + re.escape(name) + rb"\b", code) is not None
        if not aliased:
            skip.add(m.start() + 1)
    return any(
        m.start() not in skip
        and (m.start() == 0 or code[m.start() - 1] not in WORD_BYTES)
        and not _in_string_edge(code, m.start(), m.end())
        for m in _COMPILE_WORD.finditer(code)
    )


_QUOTES = frozenset(b"'\"")


def _in_string_edge(code: bytes, start: int, end: int) -> bool:
    """``"compile"``, ``"compile: marks tests"``: the word right after or before a quote is text
    in a string (a call or a decorator never touches a quote)."""
    return (start > 0 and code[start - 1] in _QUOTES) or (end < len(code) and code[end] in _QUOTES)


def is_torch_compile(rule: Rule, node: cst.Call) -> bool:
    """``torch.compile(...)`` through any alias (``from torch import compile as tc``)."""
    func = node.func
    # Cheap gate: `x.view(...)`-style method calls are most calls; an alias is a bare name.
    if isinstance(func, cst.Attribute):
        if func.attr.value != "compile":
            return False
    elif not isinstance(func, cst.Name):
        return False
    return call_qualname(rule, node) == "torch.compile"


def _imported_tops(rule: Rule) -> frozenset[str]:
    """Top-level packages the module imports anywhere (memoised per pass, like call_qualname)."""
    memo = rule.context.__dict__.get("_compile_imported_tops")
    if memo is None:
        found: set[str] = set()
        for node in _walk_imports(rule.context.module):
            if isinstance(node, cst.Import):
                for alias in node.names:
                    found.add(rule.context.code(alias.name).split(".")[0])
            elif not node.relative and node.module is not None:
                found.add(rule.context.code(node.module).split(".")[0])
        if _defines_compile(rule.context.module):
            found.add(_OWN_COMPILE)
        memo = frozenset(found)
        rule.context.__dict__["_compile_imported_tops"] = memo
    return memo


# Marks a module that defines a `compile` function or method of its own: `x.compile()` there may
# well be that one.
_OWN_COMPILE = "<def compile>"
# Marks a dotted import written with blanks around a dot, which ``ast`` and libcst's text name
# differently (the compile gate's ``_imported_tops_ast``).
_BLANK_IMPORT = "<import a . b>"


def _defines_compile(module: cst.Module) -> bool:
    # Only a statement block can hold a def: follow the blocks, never an expression (libcst's
    # visit rebuilt every node of the file for this; on diffusers that was 2% of `migrate`).
    return any(isinstance(node, cst.FunctionDef) and node.name.value == "compile" for node in statements(module))


def _walk_imports(module: cst.Module):
    return (node for node in statements(module) if isinstance(node, (cst.Import, cst.ImportFrom)))


def _is_module_compile(rule: Rule, node: cst.Call) -> bool:
    func = node.func
    if not isinstance(func, cst.Attribute) or func.attr.value != "compile":
        return False
    if call_qualname(rule, node) is not None:
        return False  # through an import: re.compile, regex.compile, torch.compile (above)
    for arg in node.args:
        if arg.star == "**":
            continue
        if arg.star or arg.keyword is None or arg.keyword.value not in COMPILE_KEYWORDS:
            return False
    tops = _imported_tops(rule)
    return "torch" in tops and not (tops & (_OTHER_COMPILES | {_OWN_COMPILE}))


def compile_callee(rule: Rule, node: cst.Call) -> str | None:
    """``"torch.compile"`` or ``"nn.Module.compile"`` for a call that compiles a model (the
    name the findings use), else None."""
    if is_torch_compile(rule, node):
        return "torch.compile"
    if _is_module_compile(rule, node):
        return "nn.Module.compile"
    return None


def is_compile_call(rule: Rule, node: cst.Call) -> bool:
    return compile_callee(rule, node) is not None


def has_star_kwargs(node: cst.Call) -> bool:
    """``f(**cfg)``: keywords the call passes that no reader of the source can see."""
    return any(arg.star == "**" for arg in node.args)


def compile_gate(cls: type[Rule], file: Any, settings: Settings) -> list[Finding] | None:  # noqa: ARG001
    """The compile family's ``detect``: a gate. No finding of CN501-CN505 where no call or
    assignment target resolves into ``torch._inductor.config`` (CN505's settings and
    ``config.patch``), no string's value is a CUDA mode (CN502's kept modes, escapes read), and
    no call or bare decorator may compile a model (``_Gate``); unsure elsewhere (libcst runs).
    The family wakes on the whole word ``compile`` in a file: ``is_compiled_module``, a
    ``regex.compile``, ``torch.compiler.disable`` hold it and report nothing; and on
    ``_inductor``, which diffusers' pipelines spell in ``torch._inductor.cudagraph_mark_step_begin()``
    and its tests in ``torch._inductor.utils.fresh_inductor_cache()``: no setting."""
    return None if _Gate(cls, file).reports() is None else []


def _imported_tops_ast(file: Any) -> frozenset[str]:
    """``_imported_tops`` on ``ast``: the statements of every block are what ``ast.walk`` meets
    of them (no expression holds an import or a def). A dotted import name written with blanks
    (``import jax . numpy``) is one libcst's text reads otherwise (``"jax "``): ``_BLANK_IMPORT``
    marks it, and the gate is unsure there."""
    found: set[str] = set()
    for node in ast.walk(file.tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [] if node.level or node.module is None else [node.module]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name == "compile":
                found.add(_OWN_COMPILE)
            continue
        else:
            continue
        for name in names:
            found.add(name.split(".")[0])
            if "." in name and name not in file.segment(node):
                found.add(_BLANK_IMPORT)
    return frozenset(found)


def _inductor_config(qualified: str | None) -> bool:
    """``torch._inductor.config`` or a name inside it: CN505's ``in_package`` test."""
    return in_package(qualified, ("torch._inductor.config",))


class _Gate(AstDetector):
    """``compile_callee`` and CN501's decorator on CPython's ``ast``, as a superset: unsure at
    the first call that resolves to ``torch.compile``, or calls a ``.compile`` that no import
    resolves (``nn.Module.compile`` is read from the call's shape), at a bare ``@...compile``, and
    at a string whose value is a CUDA mode (CPython reads escapes: ``"max\\x2dautotune"``)."""

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value in CUDA_MODES:
            self._unsure()

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        # CN505's `patch` (a superset: any call into inductor's config, `config.patch` through
        # an alias or a from-import included), asked when the visitor asks, before the arguments.
        if _inductor_config(self.ctx.call_qualname(node)):
            self._unsure()
        if isinstance(func, ast.Attribute) and func.attr != "compile":
            return
        if not isinstance(func, (ast.Attribute, ast.Name)):
            return
        qualified = self.ctx.call_qualname(node)
        if qualified == "torch.compile" or (isinstance(func, ast.Attribute) and qualified is None and self._module_compile(node)):
            self._unsure()

    def _module_compile(self, node: ast.Call) -> bool:
        """``_is_module_compile`` past its callee test: keywords of torch.compile only, and a
        file that imports torch and no other framework, nor defines a compile of its own
        (diffusers' ``jax.jit(...).lower(...).compile()``, ``submod.compile(*args, **kwargs)``)."""
        for arg in self.ctx.args(node):
            if arg.star == "**":
                continue
            if arg.star or arg.keyword is None or arg.keyword not in COMPILE_KEYWORDS:
                return False
        tops = self.__dict__.get("_tops")
        if tops is None:
            tops = self._tops = _imported_tops_ast(self.file)
        if _BLANK_IMPORT in tops:
            return True
        return "torch" in tops and not (tops & (_OTHER_COMPILES | {_OWN_COMPILE}))

    def visit_Assign(self, node: ast.Assign) -> None:
        # CN505's `visit_Assign`: an attribute target under `torch._inductor.config`, resolved
        # before the targets are bound (libcst visits the statement first, as this walk does).
        if any(isinstance(t, ast.Attribute) and _inductor_config(self.ctx.qualname(t)) for t in node.targets):
            self._unsure()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        # CN501's ``visit_Decorator`` wants the terminal name ``compile`` first: any such bare
        # decorator, whatever it resolves to (no scope read, so no question of when it is read).
        for deco in node.decorator_list:
            if (isinstance(deco, ast.Name) and deco.id == "compile") or (isinstance(deco, ast.Attribute) and deco.attr == "compile"):
                self._unsure()

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    @staticmethod
    def _unsure() -> None:
        from cuda2neuron.python import Unsure

        raise Unsure("a call or a decorator that may compile a model")
