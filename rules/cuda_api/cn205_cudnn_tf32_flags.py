"""CN205: cuDNN and TF32 switches, which do nothing on Neuron."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Fix, Invalid, Rule, Safety, Settings, Valid

from .._shared.detector import AstDetector
from .._shared.names import import_to_drop

__all__ = ["CudnnTf32Flags"]

_DETERMINISM = (
    "For reproducible runs keep (or add) `torch.use_deterministic_algorithms(True)`, which "
    "works on Neuron."
)
_TF32 = (
    "fp32 matmuls stay fp32 on Neuron; for speed use "
    "`torch.autocast(\"neuron\", dtype=torch.bfloat16)` around the forward pass."
)
# Assigned flags -> guidance.
_FLAGS: dict[str, str] = {
    "torch.backends.cudnn.benchmark": "cuDNN autotuning does not exist on Neuron; delete the line.",
    "torch.backends.cudnn.deterministic": _DETERMINISM,
    "torch.backends.cudnn.enabled": "There is no cuDNN on Neuron; delete the line.",
    "torch.backends.cudnn.allow_tf32": _TF32,
    "torch.backends.cuda.matmul.allow_tf32": _TF32,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": _TF32,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": _TF32,
}
_CALLS: dict[str, str] = {"torch.set_float32_matmul_precision": _TF32}
# cuDNN's functions: a context manager that switches it for a block, and its probes.
_CUDNN_CALLS: dict[str, str] = {
    "torch.backends.cudnn.flags": (
        "switches cuDNN for the block; Neuron has no cuDNN, so the block runs as it would "
        "without the `with`"
    ),
    "torch.backends.cudnn.set_flags": "sets cuDNN switches; Neuron has no cuDNN",
    "torch.backends.cudnn.version": "asks for the cuDNN version; there is none on Neuron",
    "torch.backends.cudnn.is_available": "probes for cuDNN; there is none on Neuron",
    "torch.backends.cudnn.is_acceptable": "asks whether cuDNN takes a tensor; there is no cuDNN on Neuron",
}
_CUDNN_CALL_MEMBERS = frozenset(q.rpartition(".")[2] for q in _CUDNN_CALLS)
_FLAG_MEMBERS = frozenset(q.rpartition(".")[2] for q in _FLAGS)
_CALL_MEMBERS = frozenset(q.rpartition(".")[2] for q in _CALLS)


def _call_guidance(member: str, target: str) -> str:
    if target != "neuron":
        return "Keep it for CUDA runs; on Neuron it does nothing."
    if member == "flags":
        return (
            "Keep the block's body and drop the `with` for Trainium (nothing there reads "
            "cuDNN's switches); if it was a determinism or correctness workaround, check the "
            "op on Neuron instead."
        )
    return "Drop the call, or the branch it decides, for Trainium."


def _read_message(qualified: str) -> str:
    return f"`{qualified}` is read here; it describes a CUDA switch that has no effect on Neuron"


_READ_GUIDANCE = (
    "The value is only what was last assigned on Neuron (no cuDNN, no TF32 there): "
    "drop the read together with the assignment it saves or tests for"
)


class CudnnTf32Flags(Rule):
    """
    ## What it does
    Reports cuDNN and TF32 switches, which do nothing on Neuron; unsafe fixes delete them.
    That is assignments to ``torch.backends.cudnn.benchmark``,
    ``.deterministic``, ``.enabled``, ``.allow_tf32``, ``torch.backends.cuda.matmul.allow_tf32``)
    and calls of ``torch.set_float32_matmul_precision(...)``; with ``--unsafe-fixes`` the whole
    statement is removed. ``torch.use_deterministic_algorithms`` works on Neuron and is left alone.
    On ``--target accelerator`` they are reported only: the port still runs on CUDA, where they
    act, and does nothing with them on Neuron or the CPU.

    cuDNN's functions are reported as well: ``with torch.backends.cudnn.flags(enabled=False):``
    around a call (a CTC loss kept off cuDNN), ``set_flags``, and the probes ``version()``,
    ``is_available()``, ``is_acceptable(t)``. The block of a ``flags`` context runs unchanged on
    Neuron; what the code decided for cuDNN (a workaround, a determinism choice) does not carry
    over, and a probe answers for a library the device does not have.

    Reads of the same flags are reported too (``old = torch.backends.cuda.matmul.allow_tf32``
    before a block that switches TF32 off and restores it, ``if torch.backends.cudnn.enabled:``,
    a flag printed in a log line): on Neuron the value is only whatever was last assigned and
    says nothing about how the device computes, so a branch or a log line built on it is CUDA
    reasoning left in the port. A read in a log message is reported as well, not skipped: the
    line still states a CUDA fact the port does not have, and a grep of the port finds it.

    ## Why is this bad?
    Neuron has no cuDNN and no TF32 mode: the switches do nothing there (fp32 stays fp32), so
    keeping them suggests a speed-up or a determinism guarantee the port does not have.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    ```
    is reported; with ``--unsafe-fixes`` both lines are deleted.

    ## Fix safety
    Reads and cuDNN's functions are report only (what the code does with the value is the
    user's call; removing a ``with`` re-indents its block). Unsafe:
    deleting the statement drops whatever the right-hand side computes, and code that
    still runs on CUDA loses the setting. Statements that share a line with other statements or
    assign several targets are only reported. On ``--target accelerator`` nothing is removed:
    that output must keep running well on CUDA (the switches are harmless on Neuron), but a
    reader must know that the speed-up or determinism they stand for does not carry over.
    """

    code = "CN205"
    name = "cudnn-tf32-flags"
    advisory = True  # the switches do nothing on Neuron: never holds back a group of linked fixes
    fixes = frozenset({Safety.UNSAFE})
    triggers = ("cudnn", "allow_tf32", "reduced_precision_reduction", "set_float32_matmul_precision")
    VALID = (
        "import torch\ntorch.use_deterministic_algorithms(True)\n",
        # A project's own settings object with the same attribute names stays.
        "cfg.backends.cudnn.benchmark = True\n",
        "print(cfg.backends.cudnn.allow_tf32)\n",
    )
    INVALID = (
        Invalid(
            "import torch\ntorch.backends.cudnn.benchmark = True\nx = 1\n",
            "import torch\nx = 1\n",
            unsafe=True,
        ),
        Invalid(
            "import torch\nif args.tf32:\n    torch.backends.cuda.matmul.allow_tf32 = True\n",
            "import torch\nif args.tf32:\n    pass\n",
            unsafe=True,
        ),
        Invalid(
            "import torch as th\nth.set_float32_matmul_precision('high')\n",
            "import torch as th\n",
            unsafe=True,
        ),
        Invalid(
            "from torch.backends import cudnn\ncudnn.deterministic = True\nx = 1\n",
            "x = 1\n",
            unsafe=True,
        ),
        # Shares its line with another statement: reported only.
        Invalid("import torch\ntorch.backends.cudnn.benchmark = True; x = 1\n"),
        Invalid("import torch\na = torch.backends.cudnn.benchmark = True\n"),
        # The accelerator target keeps the switch (it acts on CUDA) and says it does nothing on Neuron.
        Invalid("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", target="accelerator"),
        Invalid("import torch\ntorch.backends.cudnn.benchmark = True\n", target="accelerator", unsafe=True),
        # Reads: the save half of a save/restore, a branch, a log line (report only).
        Invalid("import torch\nold = torch.backends.cuda.matmul.allow_tf32\n"),
        Invalid("import torch\nif torch.backends.cudnn.enabled:\n    pass\n"),
        Invalid("from torch.backends import cudnn\nprint(f'tf32: {cudnn.allow_tf32}')\n"),
        Invalid("import torch\nold = torch.backends.cudnn.allow_tf32\n", target="accelerator"),
        # cuDNN's context manager and probes: report only.
        Invalid("import torch\nwith torch.backends.cudnn.flags(enabled=False):\n    loss = f(x)\n"),
        Invalid("from torch.backends import cudnn\nv = cudnn.version()\n"),
        Invalid("import torch\nwith torch.backends.cudnn.flags(enabled=False):\n    loss = f(x)\n", target="accelerator"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        if settings.target != "neuron":
            return None  # the accelerator target's messages are libcst's
        detector = _Detector(cls, file)
        reports = detector.reports()
        if reports is None:
            return None
        return [
            detector.finding(node, message, guidance, Effort.LOW, Fix(Safety.UNSAFE, "", "remove the statement") if removable else None)
            for node, message, guidance, removable, _ in reports
        ]

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        alone = len(node.body) == 1
        for statement in node.body:
            found = self._flag_in(statement)
            if found is None:
                continue
            qualified, guidance, removable, expr = found
            message = f"`{qualified}` has no effect on Neuron"
            if self.context.settings.target != "neuron":
                # Kept: the accelerator port still runs on CUDA, where the switch acts.
                self.report(
                    statement,
                    message + " (kept: it still acts on CUDA)",
                    guidance="Keep it for CUDA runs; it does nothing on Neuron."
                    + ("" if guidance.endswith("delete the line.") else " " + guidance),
                    effort=Effort.LOW,
                )
            elif alone and removable:
                self.report(
                    node,
                    message,
                    replacement=cst.RemovalSentinel.REMOVE,
                    safety=Safety.UNSAFE,
                    guidance=guidance,
                    unused_imports=import_to_drop(self, expr),
                    effort=Effort.LOW,
                    description="remove the statement",
                )
            else:
                self.report(statement, message, guidance=guidance, effort=Effort.LOW)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member not in _CUDNN_CALL_MEMBERS:
            return
        qualified = self.qualname(func)
        what = _CUDNN_CALLS.get(qualified or "")
        if what is None:
            return
        guidance = _call_guidance(member, self.context.settings.target)
        self.report(node, f"`{qualified}(...)` {what}", guidance=guidance, effort=Effort.LOW)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _FLAG_MEMBERS or self._is_written(node):
            return
        qualified = self.qualname(node)
        if qualified not in _FLAGS:
            return
        guidance = _READ_GUIDANCE
        if self.context.settings.target != "neuron":
            guidance = "Keep it for CUDA runs; on Neuron it says nothing about how the device computes."
        self.report(node, _read_message(qualified), guidance=guidance, effort=Effort.LOW)

    def _is_written(self, node: cst.Attribute) -> bool:
        """Assignment targets (reported by visit_SimpleStatementLine) and ``del`` are not reads."""
        parent = self.context.parent
        if isinstance(parent, cst.AssignTarget):
            return True
        if isinstance(parent, (cst.AnnAssign, cst.AugAssign)) and parent.target is node:
            return True
        return isinstance(parent, cst.Del)

    def _flag_in(self, statement: cst.BaseSmallStatement) -> tuple[str, str, bool, cst.BaseExpression] | None:
        if isinstance(statement, cst.Assign):
            for target in statement.targets:
                expr = target.target
                if isinstance(expr, cst.Attribute) and expr.attr.value in _FLAG_MEMBERS:
                    qualified = self.qualname(expr)
                    if qualified in _FLAGS:
                        return qualified, _FLAGS[qualified], len(statement.targets) == 1, expr
        elif isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
            func = statement.value.func
            member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if member in _CALL_MEMBERS:
                qualified = self.qualname(func)
                if qualified in _CALLS:
                    return qualified, _CALLS[qualified], True, func
        return None


class _Detector(AstDetector):
    """The visitor on CPython's ``ast`` for the neuron target. A flag assigned (or
    ``set_float32_matmul_precision`` called) in a statement alone on its line is reported at the
    statement with the unsafe removal, as ``visit_SimpleStatementLine`` does; a statement written
    after a suite's colon (libcst's ``SimpleStatementSuite``, which that visit never sees) or
    beside another with ``;`` is left to libcst (unsure), as is a ``del`` of several targets
    (libcst's tuple makes each a read)."""

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr in _FLAG_MEMBERS:
                qualified = self.ctx.qualname(target)
                if qualified in _FLAGS:
                    self._statement(node, qualified, _FLAGS[qualified], len(node.targets) == 1)
                    return

    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value
        if not isinstance(call, ast.Call):
            return
        func = call.func
        member = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if member in _CALL_MEMBERS:
            qualified = self.ctx.qualname(func)
            if qualified in _CALLS:
                self._statement(node, qualified, _CALLS[qualified], True)

    def _statement(self, node: ast.stmt, qualified: str, guidance: str, removable: bool) -> None:
        from cuda2neuron.python import Unsure

        if not self._alone(node):
            raise Unsure("a statement on a suite's line or beside another")
        self._reports.append((node, f"`{qualified}` has no effect on Neuron", guidance, removable, tuple(self.ctx.ancestors)))

    def _alone(self, node: ast.stmt) -> bool:
        """Is ``node`` the one statement of a line of its own (libcst's ``SimpleStatementLine``
        with one statement)? Only blanks before it on its first line, which no backslash
        continues; only blanks or a comment after it on its last."""
        text = self.file.text
        start, end = self.file.bounds(node)
        line_start = text.rfind("\n", 0, start) + 1
        if text[line_start:start].strip(" \t\f") or text[:line_start].rstrip("\r\n").endswith("\\"):
            return False
        line_end = text.find("\n", end)
        rest = text[end : len(text) if line_end < 0 else line_end].strip(" \t\f\r")
        return not rest or rest.startswith("#")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        member = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if member not in _CUDNN_CALL_MEMBERS:
            return
        qualified = self.ctx.qualname(func)
        what = _CUDNN_CALLS.get(qualified or "")
        if what is not None:
            self._reports.append((node, f"`{qualified}(...)` {what}", _call_guidance(member, "neuron"), False, tuple(self.ctx.ancestors)))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        from cuda2neuron.python import Unsure

        if node.attr not in _FLAG_MEMBERS:
            return
        parent = self.ctx.parent
        if isinstance(parent, ast.Assign) and any(t is node for t in parent.targets):
            return
        if isinstance(parent, (ast.AnnAssign, ast.AugAssign)) and parent.target is node:
            return
        if isinstance(parent, ast.Delete):
            if len(parent.targets) > 1:
                raise Unsure("`del a, b`: libcst's tuple makes each target a read")
            return
        qualified = self.ctx.qualname(node)
        if qualified in _FLAGS:
            self._reports.append((node, _read_message(qualified), _READ_GUIDANCE, False, tuple(self.ctx.ancestors)))
