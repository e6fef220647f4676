"""The autocast rules' detectors (CN301, CN302, CN303) on CPython's ``ast``: one walk serves three.

The three rules wake on the same files ("autocast" and "cuda" in the code) and look at the same
calls, so one ``python/_ast_walk.py`` walk per file collects what each needs (``amp_uses``,
kept for the file while the engine asks the three in turn):

* CN301: the calls of ``torch.cuda.amp.autocast``, and whether a name of it is not called;
* CN302: the autocast calls of torch's that take the device type ``"cuda"``;
* CN303: the autocast / GradScaler calls whose device type is a variable.

CN301's and CN302's detectors build their fixes where the text can say what libcst writes
(``torch.cuda.amp.autocast()`` made ``torch.autocast("neuron", dtype=...)``; the device literal
made "neuron", a dtype inserted), and are unsure elsewhere. CN303 only reports, so its
detector yields its findings, once ``cuda_literal`` says whether the file still holds a CUDA
device literal as the visitor's ``_CudaDeviceLiteral`` reads one, or is unsure where ``ast``
cannot tell (a literal split by implicit concatenation, an f-string written otherwise).
"""

from __future__ import annotations

import ast
import re
import weakref
from dataclasses import dataclass

from cuda2neuron.core import Effort, Finding, Span

from ..cuda_api._refs_ast import spelled
from ..device._strings_ast import simple_string
from ._helpers import AMP_DTYPE_NAMES, AUTOCAST, FLOAT16_NAMES, LEGACY_AUTOCAST, SCALER

__all__ = ["AmpUses", "CudaAutocast", "LegacyCall", "amp_uses", "cuda_literal", "variable_findings"]


@dataclass(frozen=True)
class LegacyCall:
    """A call CN301's visitor reports, as the walk saw it in its scope: its ancestors, whether it
    is written ``<torch>.cuda.amp.autocast()`` (no argument, ``torch`` or an alias of it at its
    head, so that its fix drops no import), and how the scope spells ``torch.autocast`` and each
    ``amp-dtype`` setting's dtype (``_refs_ast.spelled``)."""

    call: ast.Call
    ancestors: tuple[object, ...]
    plain: bool
    autocast: tuple[str, bool] | None
    dtypes: dict[str, tuple[str, bool] | None]


@dataclass(frozen=True)
class CudaAutocast:
    """A call CN302's visitor reports, as the walk saw it in its scope: the device argument, the
    call's ancestors, whether a dtype is passed (and is float16), whether ``**`` is, and how the
    scope spells each ``amp-dtype`` setting's dtype (``_refs_ast.spelled``: the text and whether
    it needs an import; None where ``torch`` is shadowed)."""

    call: ast.Call
    device: object  # python.ArgNode
    ancestors: tuple[object, ...]
    has_dtype: bool
    float16: bool
    double_star: bool
    dtypes: dict[str, tuple[str, bool] | None]


_APIS = ((AUTOCAST, "device_type"), (SCALER, "device"))  # CN303's, in its order
_MEMBERS = frozenset({"autocast", "GradScaler"})


class AmpUses:
    """What the walk found for the three rules (``walk_ast`` calls ``visit_*``)."""

    def __init__(self, ctx) -> None:  # noqa: ANN001 - python.AstWalk
        self.ctx = ctx
        self.legacy_calls: list[LegacyCall] = []  # CN301: calls of the old autocast
        self.legacy_references = False  # CN301: a name of it that is not called
        self.cuda_devices: list[CudaAutocast] = []  # CN302: torch's autocasts on "cuda"
        # CN303: (call, device argument, ancestors of the call) per call it would report
        self.variables: list[tuple[ast.Call, object, tuple[object, ...]]] = []

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        member = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if member not in _MEMBERS and not isinstance(func, ast.Name):
            return
        args = self.ctx.args(node)
        if member == "autocast" or isinstance(func, ast.Name):
            qualified = self.ctx.call_qualname(node)
            if qualified in LEGACY_AUTOCAST:
                self.legacy_calls.append(self._legacy_call(node, args))
            device = _arg_by_name(args, "device_type", 0)
            if device is not None and _string(device.value) == "cuda" and qualified in AUTOCAST:
                self.cuda_devices.append(self._cuda_autocast(node, device, args))
        if member not in _MEMBERS:
            return
        for names, param in _APIS:
            device = _arg_by_name(args, param, 0)
            if device is None or not _is_variable(device.value):
                continue
            if self.ctx.call_qualname(node) in names:
                self.variables.append((node, device, tuple(self.ctx.ancestors)))
                return

    def _legacy_call(self, node: ast.Call, args: list) -> LegacyCall:
        scope = self.ctx.scope
        head = node.func
        while isinstance(head, ast.Attribute):
            head = head.value
        through_torch = isinstance(head, ast.Name) and head is not node.func and scope.lookup(head.id) == "torch"
        return LegacyCall(
            node,
            tuple(self.ctx.ancestors),
            through_torch and not args,
            spelled(scope, "torch.autocast"),
            {setting: spelled(scope, name) for setting, name in AMP_DTYPE_NAMES.items()},
        )

    def _cuda_autocast(self, node: ast.Call, device: object, args: list) -> CudaAutocast:
        dtype = _arg_by_name(args, "dtype", 1)
        scope = self.ctx.scope
        return CudaAutocast(
            node,
            device,
            tuple(self.ctx.ancestors),
            dtype is not None,
            dtype is not None and self.ctx.qualname(dtype.value) in FLOAT16_NAMES,  # type: ignore[attr-defined]
            any(a.star == "**" for a in args),
            {setting: spelled(scope, name) for setting, name in AMP_DTYPE_NAMES.items()},
        )

    # References that are not calls (CN301's `_reference`): counted over (every name but a
    # callee, where `is_reference` excludes assignment targets too); CN301 is unsure at any.
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "autocast" and not self._callee(node):
            self.legacy_references = self.legacy_references or self.ctx.qualname(node) in LEGACY_AUTOCAST

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "autocast" and not self._callee(node):
            self.legacy_references = self.legacy_references or self.ctx.qualname(node) in LEGACY_AUTOCAST

    def _callee(self, node: ast.expr) -> bool:
        parent = self.ctx.parent
        return isinstance(parent, ast.Call) and parent.func is node


_USES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def amp_uses(file) -> AmpUses | None:  # noqa: ANN001 - python.AstFile
    """The walk's findings for ``file``, walked once for the three rules; None where the walk
    cannot tell what libcst's would see (``Unsure``)."""
    if file in _USES:
        return _USES[file]
    from cuda2neuron.python import AstWalk, Unsure, walk_ast

    ctx = AstWalk(file)
    uses: AmpUses | None = AmpUses(ctx)
    try:
        walk_ast(ctx, uses)
    except Unsure:
        uses = None
    _USES[file] = uses
    return uses


def _arg_by_name(args: list, keyword: str, position: int):  # noqa: ANN202 - python.ArgNode | None
    """``_shared/args.arg_by_name`` on the walk's ``ArgNode``s."""
    for a in args:
        if a.keyword == keyword:
            return a
    if any(a.star for a in args[: position + 1]):
        return None
    positional = [a for a in args if a.keyword is None and not a.star]
    return positional[position] if position < len(positional) else None


def _string(node: ast.expr) -> str | None:
    """``_shared/strings.string_value``: a plain string's value, concatenations included (a
    bytes literal or an f-string is none)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_variable(node: ast.expr) -> bool:
    """CN303's ``_is_variable``: a name or a chain of attributes of one, but ``x.device.type``."""
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        if node.attr == "type":
            return False
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name)
    return False


def variable_findings(rule: type, file, uses: AmpUses) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
    """CN303's findings: each call ``uses`` holds, where the file still holds a CUDA device
    literal; None where that, or how libcst would write the argument, cannot be told."""
    from cuda2neuron.python import Unsure, written_bounds

    if not uses.variables:
        return []
    mentions = cuda_literal(file)
    if not mentions:
        return None if mentions is None else []
    findings = []
    for call, device, ancestors in uses.variables:
        if any(isinstance(a, ast.JoinedStr) for a in ancestors):
            return None  # CPython 3.11 may misplace a node inside an f-string
        value = device.value  # type: ignore[attr-defined]
        try:
            bounds = written_bounds(file, value, (*ancestors, call, device))
        except Unsure:
            return None
        if bounds != file.bounds(value):
            return None  # libcst's argument holds the value's own parentheses: not followed
        variable = file.text[bounds[0] : bounds[1]]
        if "\n" in variable or "\r" in variable:
            return None  # libcst's code for the node alone may lose the block's indentation
        start = device.source  # type: ignore[attr-defined]  # the keyword, or the value itself
        span = Span(
            start.lineno,
            file.column(start.lineno, start.col_offset),
            value.end_lineno,
            file.column(value.end_lineno, value.end_col_offset),
        )
        findings.append(
            Finding(
                code=rule.code,
                name=rule.name,
                message=f"device type taken from `{variable}` in a file that still says \"cuda\"",
                path=file.path,
                span=span,
                guidance=f"Make sure `{variable}` holds \"neuron\" on Trainium: port the string it is "
                f"computed from (e.g. `device_type = \"neuron\" if \"neuron\" in device else \"cpu\"`), "
                "or derive it from a tensor with `x.device.type`.",
                effort=Effort.LOW,
            )
        )
    return findings


# An f-string whose first text libcst reads as "cuda" or "cuda:...": `f"cuda:{i}"`, `f"cuda{x}"`,
# `f"cuda"` (not `f"cuda{{"`, whose text goes on).
_FSTRING_DEVICE = re.compile(r"""[fF]("{3}|'{3}|"|')cuda(?::|\{(?!\{)|\1)""")
_STRING_STATEMENT_END = re.compile(r"[ \t\f]*(?:#[^\r\n]*)?(?:\r\n|\r|\n|$)")


def cuda_literal(file) -> bool | None:  # noqa: ANN001 - python.AstFile
    """CN303's ``_mentions_cuda`` on ``ast``: does the code hold a CUDA device literal as
    ``_CudaDeviceLiteral`` reads one (``"cuda"``, ``"cuda:0"``, ``f"cuda:{i}"``; not in a
    statement that is only a string, nor a ``map_location=`` dict's key or ``**`` entry)? None
    where ``ast`` cannot tell: a string that spells "cuda" is an implicit concatenation (``"cu"
    "da"`` is two strings for libcst, one for ``ast``), or sits in an f-string."""
    maybe = False
    stack: list[tuple[ast.AST, bool]] = [(file.tree, False)]  # (node, where only "maybe" counts)
    while stack:
        node, vague = stack.pop()
        if isinstance(node, ast.Expr) and _string_statement(file, node):
            continue  # a docstring or prose: libcst's finder skips the whole line
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str) and "cuda" in value:
                if vague or not simple_string(file, node):
                    maybe = True  # libcst reads each part of a concatenation alone
                elif value == "cuda" or value.startswith("cuda:"):
                    return True
            continue
        if isinstance(node, ast.JoinedStr):
            if not vague and _FSTRING_DEVICE.match(file.text, file.bounds(node)[0]):
                return True
            vague = True  # CPython 3.11 places an f-string's parts at the whole string
        elif isinstance(node, ast.keyword) and node.arg == "map_location" and isinstance(node.value, ast.Dict):
            # The finder reads the values only: a key names where a checkpoint was saved.
            stack.extend((v, vague) for k, v in zip(node.value.keys, node.value.values) if k is not None)
            continue
        stack.extend((child, vague) for child in ast.iter_child_nodes(node))
    return None if maybe else False


def _string_statement(file, node: ast.Expr) -> bool:  # noqa: ANN001 - python.AstFile
    """Is ``node`` a statement that is only a string, alone on its line(s) (libcst's
    ``SimpleStatementLine`` with one statement, which CN303's finder does not enter)? A string
    after ``;``, before one, or in a suite on its header's line is entered: not skipped here."""
    value = node.value
    if not (isinstance(value, ast.JoinedStr) or (isinstance(value, ast.Constant) and isinstance(value.value, (str, bytes)))):
        return False
    start, end = file.bounds(node)
    line_start = file._line_starts()[node.lineno - 1]
    return file.text[line_start:start].strip(" \t\f") == "" and _STRING_STATEMENT_END.match(file.text, end) is not None
