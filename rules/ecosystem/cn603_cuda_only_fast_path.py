"""CN603: a CUDA-only fast path chosen by a device check; the port must take the fallback."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings
from cuda2neuron.python import dotted_name

from ._helpers import CUDA_ONLY_PACKAGES, cuda_only_module, false_on_neuron, true_on_neuron

__all__ = ["CudaOnlyFastPath"]

_GUIDANCE_NEURON = (
    "The branch calls CUDA-only code (a CUDA extension, Triton, flash-attn, ...) and is only "
    "taken for CUDA tensors; on Neuron the fallback below it runs. Keep it that way: never "
    "rewrite this check to 'neuron'. The branch is dead on Trainium: delete it by hand, or port "
    "the fast path to NKI if its speed matters."
)
_GUIDANCE_STOP = (
    "Nothing was removed. On Trainium this check must ask for the target device (the torch.cuda "
    "rules port torch.cuda.is_available), and the CUDA-only code after it (Triton, a CUDA "
    "extension, ...) must be ported to NKI or plain PyTorch before the program can run there."
)
_GUIDANCE_ACCELERATOR = (
    "Keep this check comparing against 'cuda' (not the current accelerator): the branch calls "
    "CUDA-only code, so on Trainium the fallback must run."
)


# A suppression comment for the device (CN1xx) and torch.cuda API (CN2xx) families on the guard's
# line: on the accelerator target the CUDA branch stays, so its "cuda" check (or
# torch.cuda.is_available()) must stay too.
_PIN = "# cuda2neuron: ignore[CN1,CN2] CUDA-only fast path; other devices take the fallback"


@dataclass
class _Candidate:
    node: cst.If | cst.IfExp
    # The guard's ancestors (root first, parent last), kept for the report made at the end.
    ancestors: tuple[cst.CSTNode, ...]
    # An early exit to the fallback (`if not x.is_cuda: return ref(x)`) guards what follows it.
    early_exit: bool = False

    @property
    def parent(self) -> cst.CSTNode | None:
        return self.ancestors[-1] if self.ancestors else None


_PACKAGE_WORDS = tuple(p.rsplit(".", 1)[-1].encode() for p in CUDA_ONLY_PACKAGES)


class _Names(cst.CSTVisitor):
    """Names a guard's test and branch refer to (not attribute names: `x.load` is not `load`)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False


def _names_in(*nodes: cst.CSTNode) -> set[str]:
    collector = _Names()
    for n in nodes:
        n.visit(collector)
    return collector.names


class CudaOnlyFastPath(Rule):
    """
    ## What it does
    Finds ``if`` statements (and ``a if cond else b`` expressions, and early exits such as
    ``if not x.is_cuda: return fallback(x)`` before a CUDA path) whose condition asks whether
    a tensor is on a CUDA device (``x.is_cuda``, ``x.device.type == "cuda"``) or whether CUDA
    exists (``torch.cuda.is_available()``), also inside an ``and``, and whose branch reaches
    CUDA-only code: a CUDA C++ extension, a Triton kernel, flash-attn, xformers, apex,
    bitsandbytes... directly or through a function or class of the same file. It keeps the
    CUDA check as it is, so that the fallback is what runs on Trainium, and marks its line with
    ``# cuda2neuron: ignore[CN1,CN2] ...`` so that the device rules leave it alone.

    ## Why is this bad?
    Projects guard native fast paths with a device check and fall back to plain PyTorch
    elsewhere. A port that turns the check into ``x.device.type == "neuron"`` sends neuron
    tensors into CUDA kernels (or a JIT build of ``.cu`` files) and crashes. On Neuron the
    check is always false: the fallback is the only correct path.

    ## Example
    ```python
    def bias_act(x, b):
        if x.device.type == "cuda":
            return _FusedBiasAct.apply(x, b)  # a cpp_extension kernel
        return reference_bias_act(x, b)
    ```
    becomes
    ```python
    def bias_act(x, b):
        if x.device.type == "cuda":  # cuda2neuron: ignore[CN1,CN2] CUDA-only fast path; ...
            return _FusedBiasAct.apply(x, b)  # a cpp_extension kernel
        return reference_bias_act(x, b)
    ```

    ## Fix safety
    Safe: the fix adds a comment and deletes nothing. The check keeps its CUDA meaning (false on
    Trainium, true on CUDA), so on Trainium the fallback runs and on CUDA (``--target
    accelerator``) the kernel still does; the dead branch is left for a hand edit (delete it,
    or port the kernel to NKI). A conditional expression is marked on its statement's line when
    that statement is one line. A guard whose line already has a comment, or a multi-line
    conditional expression, is only reported. An early exit that *stops* the program where
    CUDA is missing (``if not torch.cuda.is_available(): raise SystemExit(...)``) is no
    fallback: it is reported (the CUDA-only code after it needs porting) and left to the
    torch.cuda rules, which make it a check for the target device. Checks whose branch reaches
    nothing known to be CUDA-only (a kernel imported from another module of the project) are
    not recognised and are left to the device rules.
    """

    code = "CN603"
    name = "cuda-only-fast-path"
    fixes = frozenset({Safety.SAFE})
    triggers = ("is_cuda", "cuda")
    VALID = (
        # A device-dependent branch that is not a CUDA-only kernel: the device rules port it.
        "import torch\n\ndef f(x):\n    if x.is_cuda:\n        torch.cuda.synchronize()\n    return x\n",
        # The fallback only, nothing to take out.
        "import triton\n\ndef f(x):\n    return x + 1\n",
        # Already device-agnostic.
        "import triton\n\ndef f(x, k):\n    if x.device.type == 'cpu':\n        return x\n    return k(x)\n",
        # A "no CUDA" exit in front of nothing CUDA-only.
        "import torch\n\nif not torch.neuron.is_available():\n    raise SystemExit('no device')\nprint(torch.ones(1))\n",
    )
    INVALID = (
        # Already marked (a second run): reported for the hand edit, not marked again.
        Invalid(
            "import xformers.ops as xops\n\ndef f(q):\n    if q.is_cuda:  " + _PIN + "\n"
            "        return xops.memory_efficient_attention(q, q, q)\n    return q\n",
        ),
        Invalid(
            "from torch.utils.cpp_extension import load\n\n"
            "def _ext():\n    return load(name='e', sources=['e.cu'])\n\n"
            "def f(x):\n"
            "    # the kernel exists only for CUDA tensors\n"
            '    if x.device.type == "cuda":\n'
            "        return _ext().forward(x)\n"
            "    return x * 2\n",
            "from torch.utils.cpp_extension import load\n\n"
            "def _ext():\n    return load(name='e', sources=['e.cu'])\n\n"
            "def f(x):\n"
            "    # the kernel exists only for CUDA tensors\n"
            '    if x.device.type == "cuda":  ' + _PIN + "\n"
            "        return _ext().forward(x)\n"
            "    return x * 2\n",
        ),
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def f(x):\n    if HAS_TRITON and x.is_cuda:\n        _k[(1,)](x)\n        y = x\n"
            "    else:\n        y = x + 1\n    return y\n",
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def f(x):\n    if HAS_TRITON and x.is_cuda:  " + _PIN + "\n        _k[(1,)](x)\n        y = x\n"
            "    else:\n        y = x + 1\n    return y\n",
        ),
        Invalid(
            "import xformers.ops as xops\n\ny = xops.memory_efficient_attention(q, k, v) if q.is_cuda else ref(q, k, v)\n",
            "import xformers.ops as xops\n\ny = xops.memory_efficient_attention(q, k, v) if q.is_cuda else ref(q, k, v)  "
            + _PIN + "\n",
        ),
        # The early-exit shape: the fallback returns first, the CUDA path follows.
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            'def f(x):\n    if x.device.type != "cuda":\n        return x + 1\n    _k[(1,)](x)\n    return x\n',
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            'def f(x):\n    if x.device.type != "cuda":  ' + _PIN + "\n        return x + 1\n    _k[(1,)](x)\n    return x\n",
        ),
        # An early exit that stops the program without CUDA: no fallback, nothing deleted.
        Invalid(
            "import torch\nimport triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def main(x):\n    if not torch.cuda.is_available():\n        raise SystemExit('needs a GPU')\n"
            "    _k[(1,)](x)\n    print(x)\n",
        ),
        Invalid(
            "import xformers.ops as xops\n\ndef f(q):\n    if q.is_cuda:\n        return xops.memory_efficient_attention(q, q, q)\n    return q\n",
            "import xformers.ops as xops\n\ndef f(q):\n    if q.is_cuda:  " + _PIN + "\n"
            "        return xops.memory_efficient_attention(q, q, q)\n    return q\n",
            target="accelerator",
        ),
        # A conditional expression over several lines: a comment on one line would not cover it.
        Invalid(
            "import xformers.ops as xops\n\ny = (\n    xops.memory_efficient_attention(q, k, v)\n    if q.is_cuda\n    else ref(q, k, v)\n)\n",
            target="accelerator",
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        self._candidates: list[_Candidate] = []
        # Names bound by imports of CUDA-only packages (triton, xops, flash_attn_func, load...).
        self._cuda_names: set[str] = set()
        # Top-level functions/classes: the names they reference, and which touch CUDA-only code.
        self._refs: dict[str, set[str]] = {}
        self._tainted: set[str] = set()
        self._owner: str | None = None
        self._depth = 0

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Only a guard in front of a CUDA-only import is reported, and every such import spells
        # its package's last name (`from torch.utils import cpp_extension`, `import triton`):
        # diffusers' 312 files with "cuda" hold one in 20.
        return any(word in code for word in _PACKAGE_WORDS)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: every report is a guard whose test asks about CUDA and whose code reaches a
        name a CUDA-only import binds (``_may_report``); a file where none can be gets no
        finding. Unsure elsewhere: libcst runs (the pin is a fix, and the program pass reads
        what a fast path holds)."""
        return None if _may_report(file) else []

    # -- what is CUDA-only ------------------------------------------------------------------
    # Import targets are always dotted names: dotted_name answers None only for calls and
    # subscripts, which an import cannot hold.
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name) or ""
            if cuda_only_module(full):
                bound = alias.asname.name if alias.asname is not None else None
                self._bind(bound.value if isinstance(bound, cst.Name) else full.split(".")[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = dotted_name(node.module) or ""
        for alias in node.names:
            name = dotted_name(alias.name) or ""
            if cuda_only_module(module) or cuda_only_module(f"{module}.{name}"):
                bound = alias.asname.name if alias.asname is not None else None
                self._bind(bound.value if isinstance(bound, cst.Name) else name)

    def _bind(self, name: str) -> None:
        self._cuda_names.add(name)
        if self._owner is not None:
            self._tainted.add(self._owner)

    def _enter(self, name: str) -> None:
        if self._depth == 0:
            self._owner = name
            self._refs.setdefault(name, set())
        self._depth += 1

    def _leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._enter(node.name.value)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._leave()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._enter(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._leave()

    def visit_Name(self, node: cst.Name) -> None:
        if self._owner is None:
            return
        self._refs[self._owner].add(node.value)
        if node.value in self._cuda_names:
            self._tainted.add(self._owner)

    # -- the guards -------------------------------------------------------------------------
    def visit_If(self, node: cst.If) -> None:
        if false_on_neuron(node.test, self):
            self._candidates.append(_Candidate(node, tuple(self.context.ancestors)))
        elif node.orelse is None and _exits(node) and (
            true_on_neuron(node.test, self) or (_stops(node) and self._no_target_device(node.test))
        ):
            self._candidates.append(_Candidate(node, tuple(self.context.ancestors), early_exit=True))

    def _no_target_device(self, test: cst.BaseExpression) -> bool:
        """``not torch.neuron.is_available()`` (or the accelerator's): a "no CUDA" exit after
        the torch.cuda rules ported it. The CUDA-only code after it is still to be reported."""
        if not (isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)):
            return False
        call = test.expression
        return isinstance(call, cst.Call) and not call.args and self.qualname(call.func) in _TARGET_CHECKS

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if false_on_neuron(node.test, self):
            self._candidates.append(_Candidate(node, tuple(self.context.ancestors)))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._candidates or not self._cuda_names:
            return
        bad = self._cuda_names | self._closure()
        for cand in self._candidates:
            if cand.early_exit:
                rest = _after(cand)
                if not rest or not (_names_in(*rest) & bad):
                    continue
            elif not (_names_in(cand.node.test, cand.node.body) & bad):
                continue
            self._report_guard(cand)

    def _closure(self) -> set[str]:
        tainted = set(self._tainted)
        changed = True
        while changed:
            changed = False
            for owner, refs in self._refs.items():
                if owner not in tainted and refs & tainted:
                    tainted.add(owner)
                    changed = True
        return tainted

    def _report_guard(self, cand: _Candidate) -> None:
        if cand.early_exit and _stops(cand.node):
            # `if not torch.cuda.is_available(): raise SystemExit(...)`: not a fallback but the
            # program refusing to run. Deleting what follows would leave a program that only
            # exits; pinning the check would keep it exiting on Trainium. Report the CUDA-only
            # code it protects and let the torch.cuda rules ask for the target device.
            self.report(
                cand.node,
                "the program stops where CUDA is missing, and the code after this check uses "
                "CUDA-only kernels",
                guidance=_GUIDANCE_STOP,
                effort=Effort.MEDIUM,
                ancestors=cand.ancestors,
            )
            return
        message = "a CUDA check selects a CUDA-only fast path; on Neuron the fallback must run"
        guidance = _GUIDANCE_NEURON if self.context.settings.target == "neuron" else _GUIDANCE_ACCELERATOR
        built = _pinned(cand, self)
        if built is None:
            # Pinned already (or nowhere to pin): the dead CUDA branch and its kernel stay in
            # the program, so the finding stays, for a hand edit.
            if _is_pinned(cand, self):
                message = "a CUDA-only fast path is kept behind its CUDA check (never taken on Trainium)"
            self.report(cand.node, message, guidance=guidance, effort=Effort.LOW, ancestors=cand.ancestors)
            return
        node, replacement, ancestors = built
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            guidance=guidance,
            description="keep the CUDA check (suppress device rules on this line)",
            ancestors=ancestors,
        )


def _pin_comment(rule: Rule, owner: cst.CSTNode) -> cst.Comment | None:
    if isinstance(owner, cst.If) and isinstance(owner.body, cst.IndentedBlock):
        return owner.body.header.comment
    if isinstance(owner, cst.SimpleStatementLine):
        return owner.trailing_whitespace.comment
    return None


def _line_of(cand: _Candidate, rule: Rule) -> tuple[cst.CSTNode, tuple[cst.CSTNode, ...]] | None:
    """The statement whose line carries the pin: the ``if`` itself, or the one-line statement
    around a conditional expression (with its ancestors)."""
    if isinstance(cand.node, cst.If):
        return (cand.node, cand.ancestors) if isinstance(cand.node.body, cst.IndentedBlock) else None
    for i in range(len(cand.ancestors) - 1, -1, -1):
        anc = cand.ancestors[i]
        if isinstance(anc, cst.SimpleStatementLine):
            if "\n" in rule.context.code(anc).strip("\n"):
                return None  # a comment on one line would not cover the expression
            return anc, cand.ancestors[:i]
    return None


def _is_pinned(cand: _Candidate, rule: Rule) -> bool:
    line = _line_of(cand, rule)
    comment = _pin_comment(rule, line[0]) if line is not None else None
    return comment is not None and "cuda2neuron:" in comment.value


def _pinned(cand: _Candidate, rule: Rule) -> tuple[cst.CSTNode, cst.CSTNode, tuple[cst.CSTNode, ...]] | None:
    """(line statement, the same with the pin comment, its ancestors), or None where the line
    has a comment already or no single line holds the check."""
    line = _line_of(cand, rule)
    if line is None:
        return None
    owner, ancestors = line
    if _pin_comment(rule, owner) is not None:
        return None
    comment = cst.Comment(_PIN)
    if isinstance(owner, cst.If):
        assert isinstance(owner.body, cst.IndentedBlock)
        header = owner.body.header.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=comment)
        return owner, owner.with_changes(body=owner.body.with_changes(header=header)), ancestors
    assert isinstance(owner, cst.SimpleStatementLine)
    trailing = owner.trailing_whitespace.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=comment)
    return owner, owner.with_changes(trailing_whitespace=trailing), ancestors


def _exits(node: cst.If) -> bool:
    """The `if` body always leaves the block (ends in return/raise, or ends the program)."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    return (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))) or _stops(node)


_TARGET_CHECKS = frozenset({"torch.neuron.is_available", "torch.accelerator.is_available"})
_EXIT_CALLS = frozenset({"exit", "quit", "sys.exit", "os._exit"})


def _stops(node: cst.If) -> bool:
    """The early exit ends the program (raise, sys.exit(...)) instead of returning a fallback."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    if not isinstance(last, cst.SimpleStatementLine):
        return False
    stmt = last.body[-1]
    if isinstance(stmt, cst.Raise):
        return True
    if isinstance(stmt, cst.Expr) and isinstance(stmt.value, cst.Call):
        return dotted_name(stmt.value.func) in _EXIT_CALLS
    return False


def _after(cand: _Candidate) -> list[cst.BaseStatement]:
    """The statements that follow an early-exit guard in its block."""
    parent = cand.parent
    if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
        return []
    index = next(i for i, s in enumerate(parent.body) if s is cand.node)
    return list(parent.body[index + 1 :])


def _may_report(file) -> bool:  # noqa: ANN001 - python.AstFile
    """Could the visitor report in ``file`` (CPython's ``ast``)? ``leave_Module`` reports a guard
    only where the names in its test and branch (or, for an early exit, in what follows it)
    meet the names bound by imports of CUDA-only modules or the top-level functions and classes
    that reach one. Each set is counted over, never under: every word of a region's text stands
    for a name libcst's visitors collect there (``_Names``, ``visit_Name``), whatever the order
    of the walk; a test stands for a guard wherever ``_guards`` says it may be one."""
    tree = file.tree
    cuda_names = _cuda_names(tree)
    if not cuda_names:
        return False
    regions = [_guard_region(file, node, parent, early) for node, parent, early in _guards(tree)]
    if not regions:
        return False
    owners: dict[str, set[str]] = {}
    for name, node in _top_level(tree.body):
        owners.setdefault(name, set()).update(_words(file, node))  # a name defined twice: both
    tainted = {name for name, words in owners.items() if words & cuda_names}
    changed = True
    while changed:
        grown = {name for name, words in owners.items() if name not in tainted and words & tainted}
        tainted |= grown
        changed = bool(grown)
    bad = cuda_names | tainted
    return any(region & bad for region in regions)


def _cuda_names(tree: ast.Module) -> set[str]:
    """The names imports of CUDA-only modules bind (``visit_Import`` / ``visit_ImportFrom``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if cuda_only_module(a.name))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module is not None:
            module = node.module
            names.update(
                a.asname or a.name for a in node.names if cuda_only_module(module) or cuda_only_module(f"{module}.{a.name}")
            )
    return names


def _guards(tree: ast.Module):  # noqa: ANN202 - Iterator[tuple[ast.If | ast.IfExp, ast.AST, bool]]
    """Each ``if`` and conditional expression the visitor may take for a guard (``visit_If``,
    ``visit_IfExp``), with the node holding it and whether it may be an early exit."""
    for parent in ast.walk(tree):
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.IfExp):
                if _false_like(node.test):
                    yield node, parent, False
            elif isinstance(node, ast.If):
                if _false_like(node.test):
                    yield node, parent, False
                elif not node.orelse and _exits_like(node) and (
                    _true_like(node.test) or (_stops_like(node) and _no_target_like(node.test))
                ):
                    yield node, parent, True


def _guard_region(file, node: ast.If | ast.IfExp, parent: ast.AST, early: bool) -> set[str]:  # noqa: ANN001 - python.AstFile
    """The words of what the visitor reads for a guard: its test and branches, or for an early
    exit, the statements after it in its block (``_after``)."""
    if not early:
        return _words(file, node)
    words: set[str] = set()
    for block in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")):
        if isinstance(block, list) and any(s is node for s in block):
            for stmt in block[[id(s) for s in block].index(id(node)) + 1 :]:
                words |= _words(file, stmt)
    return words

def _top_level(body: list[ast.stmt]):  # noqa: ANN202 - Iterator[tuple[str, ast.AST]]
    """The functions and classes defined outside any other (``_enter`` at depth 0), also inside
    a module-level ``if`` / ``try`` / ``with`` / loop / ``match``."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield stmt.name, stmt
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.stmt):
                    yield from _top_level([child])
                elif isinstance(getattr(child, "body", None), list):  # an except clause, a match case
                    yield from _top_level(child.body)


_WORD = re.compile(r"\w+")


def _words(file, node: ast.AST) -> set[str]:  # noqa: ANN001 - python.AstFile
    """Every word of ``node``'s text, its decorators included: more than the names it holds."""
    first = min([node, *getattr(node, "decorator_list", ())], key=lambda n: (n.lineno, n.col_offset))
    start = file.offset(first.lineno, first.col_offset)
    end = file.offset(node.end_lineno, node.end_col_offset)
    return set(_WORD.findall(file.text, start, end))

# The guards' tests on ``ast``, each counted over its libcst namesake (``_helpers.false_on_neuron``,
# ``true_on_neuron``, ``cuda_check``; ``_no_target_device``, ``_exits``, ``_stops``): the callee of
# an ``is_available()`` is not resolved, a comparison with a "cuda" literal needs no ``.type``.
def _cuda_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (node.value == "cuda" or node.value.startswith("cuda:"))


def _compares_cuda(node: ast.expr, ops: tuple[type, ...]) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ops)
        and (_cuda_literal(node.left) or _cuda_literal(node.comparators[0]))
    )


def _false_like(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr == "is_cuda"
    if _compares_cuda(node, (ast.Eq, ast.Is, ast.In)):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name == "startswith" and node.args and _cuda_literal(node.args[0]):
            return True
        return name == "is_available" and not node.args and not node.keywords
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        return any(_false_like(v) for v in node.values)
    return False


def _true_like(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _false_like(node.operand)
    if _compares_cuda(node, (ast.NotEq, ast.IsNot)):
        return True
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(_true_like(v) for v in node.values)
    return False


def _no_target_like(node: ast.expr) -> bool:
    """``not <a call without arguments>``: ``not torch.neuron.is_available()`` through any alias."""
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.Not)
        and isinstance(node.operand, ast.Call)
        and not node.operand.args
        and not node.operand.keywords
    )


def _stops_like(node: ast.If) -> bool:
    last = node.body[-1]
    return isinstance(last, ast.Raise) or (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call))


def _exits_like(node: ast.If) -> bool:
    return isinstance(node.body[-1], ast.Return) or _stops_like(node)
