"""CN603: a CUDA-only fast path chosen by a device check; the port must take the fallback."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety
from cuda2neuron.python import dotted_name

from ._helpers import cuda_only_module, false_on_neuron, true_on_neuron

__all__ = ["CudaOnlyFastPath"]

_GUIDANCE_NEURON = (
    "The branch calls CUDA-only code (a CUDA extension, Triton, flash-attn, ...) and is only "
    "taken for CUDA tensors; on Neuron the fallback below it runs. Keep it that way: never "
    "rewrite this check to 'neuron'. Port the fast path to NKI if its speed matters."
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
    exists (``torch.cuda.is_available()``), also inside an ``and``, and whose branch reaches CUDA-only code: a CUDA C++ extension, a Triton kernel,
    flash-attn, xformers, apex, bitsandbytes... directly or through a function or class of the
    same file. With ``--target neuron`` it removes that branch so the fallback is what remains.

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
        return reference_bias_act(x, b)
    ```

    ## Fix safety
    Safe for ``--target neuron``: no tensor of the ported program lives on a CUDA device, so the
    removed branch could never run; what runs is unchanged. Removing it (rather than leaving
    the check) is what stops the device rules from rewriting the check to ``"neuron"``: the fix
    spans the enclosing block, so it is applied first and the comparison is gone before they
    look again. With ``--target accelerator`` the code must still use the kernel on CUDA: the
    fix keeps the branch and adds ``# cuda2neuron: ignore[CN1,CN2] ...`` to the ``if`` line, a
    suppression that keeps the device and torch.cuda API rules from turning its ``"cuda"`` (or
    ``torch.cuda.is_available()``) into the current accelerator (safe: a comment; a conditional expression or a line that already has a
    comment is only reported). Checks whose branch reaches nothing known
    to be CUDA-only (a kernel imported from another module of the project) are not recognised
    and are left to the device rules.
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
    )
    INVALID = (
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
            "    return x * 2\n",
        ),
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def f(x):\n    if HAS_TRITON and x.is_cuda:\n        _k[(1,)](x)\n        y = x\n"
            "    else:\n        y = x + 1\n        y = y * 2\n    return y\n",
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def f(x):\n    y = x + 1\n    y = y * 2\n    return y\n",
        ),
        Invalid(
            "from flash_attn import flash_attn_func\n\n"
            "def backend(q):\n    if flash_attn_func is not None and q.is_cuda:\n        return 'flash'\n"
            "    elif q.dtype == 1:\n        return 'half'\n    return 'sdpa'\n",
            "from flash_attn import flash_attn_func\n\n"
            "def backend(q):\n    if q.dtype == 1:\n        return 'half'\n    return 'sdpa'\n",
        ),
        Invalid(
            "import xformers.ops as xops\n\ny = xops.memory_efficient_attention(q, k, v) if q.is_cuda else ref(q, k, v)\n",
            "import xformers.ops as xops\n\ny = ref(q, k, v)\n",
        ),
        # The early-exit shape: the fallback returns first, the CUDA path follows.
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            'def f(x):\n    if x.device.type != "cuda":\n        return x + 1\n    _k[(1,)](x)\n    return x\n',
            "import triton\n\n@triton.jit\ndef _k(p):\n    pass\n\n"
            "def f(x):\n    return x + 1\n",
        ),
        Invalid(
            "import xformers.ops as xops\n\ndef f(q):\n    if q.is_cuda:\n        return xops.memory_efficient_attention(q, q, q)\n    return q\n",
            "import xformers.ops as xops\n\ndef f(q):\n    if q.is_cuda:  " + _PIN + "\n"
            "        return xops.memory_efficient_attention(q, q, q)\n    return q\n",
            target="accelerator",
        ),
        Invalid(
            "import xformers.ops as xops\n\ny = xops.memory_efficient_attention(q, k, v) if q.is_cuda else ref(q, k, v)\n",
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
        elif node.orelse is None and _exits(node) and true_on_neuron(node.test, self):
            self._candidates.append(_Candidate(node, tuple(self.context.ancestors), early_exit=True))

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
        message = "a CUDA check selects a CUDA-only fast path; on Neuron the fallback must run"
        if self.context.settings.target != "neuron":
            self._pin_guard(cand, message)
            return
        built = _take_fallback(cand)
        if built is None:
            self.report(cand.node, message, guidance=_GUIDANCE_NEURON, effort=Effort.LOW)
            return
        node, replacement = built
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            guidance=_GUIDANCE_NEURON,
            description="remove the CUDA-only branch; keep the fallback",
            # Reported from leave_Module, about a node seen earlier: give the engine its place.
            ancestors=cand.ancestors[:-1] if node is cand.parent else cand.ancestors,
        )

    def _pin_guard(self, cand: _Candidate, message: str) -> None:
        """Accelerator target: keep the branch, and keep the device rules off its check."""
        node = cand.node
        header = node.body.header if isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock) else None
        if header is not None and header.comment is not None and "cuda2neuron:" in header.comment.value:
            return  # already pinned (by us or by the user)
        if header is None or header.comment is not None:
            self.report(node, message, guidance=_GUIDANCE_ACCELERATOR, effort=Effort.LOW)
            return
        assert isinstance(node, cst.If) and isinstance(node.body, cst.IndentedBlock)
        pinned = header.with_changes(
            whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(_PIN)
        )
        self.report(
            node,
            message,
            replacement=node.with_changes(body=node.body.with_changes(header=pinned)),
            safety=Safety.SAFE,
            guidance=_GUIDANCE_ACCELERATOR,
            description="keep the CUDA check (suppress device rules on this line)",
            ancestors=cand.ancestors,
        )


def _exits(node: cst.If) -> bool:
    """The `if` body always leaves the block (ends in return/raise)."""
    body = node.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))


def _after(cand: _Candidate) -> list[cst.BaseStatement]:
    """The statements that follow an early-exit guard in its block."""
    parent = cand.parent
    if not isinstance(parent, cst.IndentedBlock):
        return []
    index = next(i for i, s in enumerate(parent.body) if s is cand.node)
    return list(parent.body[index + 1 :])


def _take_fallback(cand: _Candidate) -> tuple[cst.CSTNode, cst.CSTNode | cst.RemovalSentinel] | None:
    """(node to replace, replacement) that leaves only the fallback of the guard."""
    node, parent = cand.node, cand.parent
    if cand.early_exit:
        # `if not x.is_cuda: return ref(x)` + the CUDA path: on Neuron the exit is always taken,
        # so its body replaces the `if` and the CUDA path after it goes.
        assert isinstance(parent, cst.IndentedBlock) and isinstance(node, cst.If)
        assert isinstance(node.body, cst.IndentedBlock)
        stmts = list(node.body.body)
        stmts[0] = stmts[0].with_changes(leading_lines=[*node.leading_lines, *stmts[0].leading_lines])
        index = next(i for i, s in enumerate(parent.body) if s is node)
        return parent, parent.with_changes(body=[*parent.body[:index], *stmts])
    if isinstance(node, cst.IfExp):
        return node, node.orelse.with_changes(lpar=node.lpar, rpar=node.rpar) if node.lpar else node.orelse
    if isinstance(parent, cst.If) and parent.orelse is node:
        # An `elif`: the outer `if` keeps going with what followed.
        return node, node.orelse if node.orelse is not None else cst.RemovalSentinel.REMOVE
    if not isinstance(parent, (cst.IndentedBlock, cst.Module)):
        return None
    has_comment = any(line.comment is not None for line in node.leading_lines)
    if node.orelse is None and not has_comment:
        # The finding then points at the `if` itself, not at the enclosing block.
        return node, cst.RemovalSentinel.REMOVE
    if isinstance(node.orelse, cst.If):
        return node, node.orelse.with_changes(leading_lines=node.leading_lines)
    # Splice into the enclosing block: the `else:` statements (or the next `elif`) replace the
    # `if`, and the comments above the `if` stay where they were.
    if node.orelse is None:
        stmts: list[cst.BaseStatement] = []
    else:
        block = node.orelse.body
        if not isinstance(block, cst.IndentedBlock):
            return None
        stmts = list(block.body)
    body = list(parent.body)
    index = next(i for i, s in enumerate(body) if s is node)
    if stmts:
        stmts[0] = stmts[0].with_changes(leading_lines=[*node.leading_lines, *stmts[0].leading_lines])
    elif index + 1 < len(body):
        follower = body[index + 1]
        body[index + 1] = follower.with_changes(leading_lines=[*node.leading_lines, *follower.leading_lines])
    body[index : index + 1] = stmts
    if not body:
        body = [cst.SimpleStatementLine([cst.Pass()])]
    return parent, parent.with_changes(body=body)
