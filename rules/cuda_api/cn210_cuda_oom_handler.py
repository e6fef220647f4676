"""CN210: out-of-memory handlers written for CUDA's error (its type, or the text of its message)."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings, Valid

from .._shared.strings import string_value

__all__ = ["CudaOomHandler"]

# The text of errors only CUDA raises: the caching allocator's "CUDA out of memory. Tried to
# allocate ..." (older torch: "CUDA error: out of memory"), cuDNN's and cuBLAS's status codes.
# The CPU allocator says "DefaultCPUAllocator: can't allocate memory": not CUDA's, not here.
_CUDA_ERROR_TEXT = re.compile(r"out of memory|\bCUDA\b|cuDNN|CUDNN_STATUS|CUBLAS_STATUS", re.IGNORECASE)
_OOM = "torch.cuda.OutOfMemoryError"
# A device's name: `'cuda' in str(dev)` tests where a value lives (CN103's), not an error's text,
# unless what is turned to text is an exception the handler caught.
_DEVICE_NAME = re.compile(r"\s*cuda(:\d+)?\s*", re.IGNORECASE)
# torch.OutOfMemoryError is the class torch.cuda.OutOfMemoryError names since torch 2.5.
_GENERIC_SINCE = (2, 5)
_GUIDANCE = (
    "The Neuron target API does not document which error the device raises when its memory runs "
    "out, nor its message; a handler that tests CUDA's text never fires there, so the retry or "
    "the batch-halving it guards does not happen. Catch `torch.OutOfMemoryError` (what PyTorch "
    "raises for any device's allocator that reports OOM through it) and check on a Trainium run "
    "what your runtime raises."
)


def _maybe_error_text(expr: ast.expr, caught: set[str]) -> bool:
    """Could ``_is_error_text`` say yes to ``expr``? ``str(...)`` / ``repr(...)``, ``x.args``
    (or a subscript of it), or a name some ``except ... as`` of the file binds."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("str", "repr"):
        return True
    if isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Attribute) and expr.attr == "args":
        return True
    return isinstance(expr, ast.Name) and expr.id in caught


class CudaOomHandler(Rule):
    """
    ## What it does
    Reports out-of-memory handlers written for CUDA's error, by its type or its message. That is a test of an exception's text for CUDA's
    message (``"CUDA out of memory" in str(e)``, ``"out of memory" in e.args[0]``,
    ``"CUDNN_STATUS_NOT_SUPPORTED" in str(e)``), and ``torch.cuda.OutOfMemoryError``, which is
    rewritten to ``torch.OutOfMemoryError`` (the same class since torch 2.5) and reported.

    ## Why is this bad?
    Retry-on-OOM helpers (halve the batch, move inputs to the CPU, skip the step) decide by
    the error CUDA raises. On Trainium the error that signals exhausted device memory is not
    CUDA's, and its message does not say "CUDA out of memory", so the handler re-raises and
    the run stops where it used to recover, while nothing in the port looks wrong.

    ## Example
    ```python
    except RuntimeError as e:
        if "CUDA out of memory" in str(e):
            retry()
    ```
    is reported: test for the error the Neuron runtime raises (``torch.OutOfMemoryError`` where it
    uses PyTorch's) instead of CUDA's text.

    ## Fix safety
    Safe: ``torch.cuda.OutOfMemoryError`` *is* ``torch.OutOfMemoryError`` (torch >= 2.5;
    ``--min-torch`` below that only reports), so every ``except`` catches what it caught before.
    The finding stays: which error the Neuron runtime raises is not documented. Message tests are
    report only.
    """

    code = "CN210"
    name = "cuda-oom-handler"
    fixes = frozenset({Safety.SAFE})
    triggers = ("OutOfMemoryError", "out of memory", "CUDA", "cuDNN", "CUDNN_", "CUBLAS_")
    emits = ("torch.OutOfMemoryError",)
    VALID = (
        # The CPU allocator's message, and CUDA's words outside an exception test.
        "try:\n    f()\nexcept RuntimeError as e:\n    if \"can't allocate memory\" in str(e):\n        pass\n",
        "print('CUDA out of memory: lower the batch size')\n",
        "if 'CUDA' in name:\n    pass\n",
        "import torch\ntry:\n    f()\nexcept torch.OutOfMemoryError:\n    pass\n",
        # A device test (CN103's): the text of a device, not of an error (RWKV's strategy code).
        "use_kernel = os.environ['USE_CUDA_KERNEL'] == '1' and 'cuda' in str(dev)\n",
    )
    INVALID = (
        Invalid(
            "try:\n    f()\nexcept RuntimeError as e:\n    if 'CUDA out of memory' in str(e):\n        pass\n"
        ),
        Invalid(
            "def is_oom(exc):\n    return 'CUDA' in exc.args[0] and 'out of memory' in exc.args[0]\n"
        ),
        Invalid("try:\n    f()\nexcept RuntimeError as err:\n    if 'out of memory' not in err:\n        raise\n"),
        # CUDA's name in a caught error's text: the device's error, as above.
        Invalid("try:\n    f()\nexcept RuntimeError as e:\n    if 'CUDA' in str(e):\n        raise\n"),
        Invalid(
            "import torch\ntry:\n    f()\nexcept torch.cuda.OutOfMemoryError:\n    pass\n",
            "import torch\ntry:\n    f()\nexcept torch.OutOfMemoryError:\n    pass\n",
        ),
        Invalid(
            "from torch.cuda import OutOfMemoryError\ntry:\n    f()\nexcept OutOfMemoryError:\n    pass\n",
            "import torch\n\ntry:\n    f()\nexcept torch.OutOfMemoryError:\n    pass\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\ntry:\n    f()\nexcept torch.cuda.OutOfMemoryError:\n    pass\n",
            options=(("min_torch", (2, 4)),),  # type: ignore[arg-type]
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where no visit can report, unsure elsewhere. A report needs
        ``OutOfMemoryError`` written (the class, by attribute or by its own name), or a single
        ``in`` / ``not in`` test whose left side is one string literal matching CUDA's error text
        and whose right side may be an error's text (``_maybe_error_text``). Most woken files
        only write "CUDA" in a message or a device test (``"cuda" in device``)."""
        if "OutOfMemoryError" in file.text:
            return None
        caught = {h.name for h in ast.walk(file.tree) if isinstance(h, ast.ExceptHandler) and h.name}
        for node in ast.walk(file.tree):
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))):
                continue
            left = node.left
            if not isinstance(left, ast.Constant) or not isinstance(left.value, (str, bytes)):
                continue
            if (isinstance(left.value, bytes) or _CUDA_ERROR_TEXT.search(left.value)) and _maybe_error_text(node.comparators[0], caught):
                return None
        return []

    def __init__(self, context) -> None:
        super().__init__(context)
        # Names bound by the enclosing `except ... as name:` clauses: the exception objects.
        self._caught: list[str] = []

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None and isinstance(node.name.name, cst.Name):
            self._caught.append(node.name.name.value)

    def leave_ExceptHandler(self, original_node: cst.ExceptHandler) -> None:
        if original_node.name is not None and isinstance(original_node.name.name, cst.Name):
            self._caught.pop()

    # -- torch.cuda.OutOfMemoryError -----------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "OutOfMemoryError" and self.qualname(node) == _OOM:
            self._oom_class(node, ())

    def visit_Name(self, node: cst.Name) -> None:
        if node.value != "OutOfMemoryError":
            return
        parent = self.context.parent
        if isinstance(parent, (cst.Attribute, cst.ImportAlias)):
            return
        if self.context.scope.lookup(node.value) == _OOM:
            self._oom_class(node, (("torch.cuda", "OutOfMemoryError"),))

    def _oom_class(self, node: cst.BaseExpression, unused: tuple) -> None:
        message = "`torch.cuda.OutOfMemoryError` is CUDA's out-of-memory error"
        spelled = self.spell("torch.OutOfMemoryError")
        if self.context.settings.min_torch < _GENERIC_SINCE or spelled is None:
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        replacement, imports = spelled
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=unused,
            guidance=_GUIDANCE,
            # The rename keeps the meaning; whether Neuron raises it is still the user's check.
            effort=Effort.LOW,
            description="name the device-generic class",
        )

    # -- "CUDA out of memory" in str(e) --------------------------------------------------------
    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) != 1 or not isinstance(node.comparisons[0].operator, (cst.In, cst.NotIn)):
            return
        text = string_value(node.left) if isinstance(node.left, cst.SimpleString) else None
        if text is None or not _CUDA_ERROR_TEXT.search(text):
            return
        comparator = node.comparisons[0].comparator
        if not self._is_error_text(comparator):
            return
        if _DEVICE_NAME.fullmatch(text) and not self._is_caught_text(comparator):
            return
        self.report(
            node,
            f"the test for {text.strip()!r} in an error's text matches CUDA's error message, "
            "which the neuron device does not raise",
            guidance=_GUIDANCE,
            effort=Effort.MEDIUM,
        )

    def _is_error_text(self, expr: cst.BaseExpression) -> bool:
        """``str(e)``, ``repr(e)``, ``e.args[0]``, ``e.args``, or a name an ``except`` bound."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("str", "repr"):
            return self.context.scope.lookup(expr.func.value) is None
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        if isinstance(expr, cst.Attribute) and expr.attr.value == "args":
            return True
        return isinstance(expr, cst.Name) and expr.value in self._caught

    def _is_caught_text(self, expr: cst.BaseExpression) -> bool:
        """The text of an exception for sure: ``e.args``, or ``str(e)`` of a name an ``except`` bound."""
        if isinstance(expr, cst.Call) and expr.args:
            expr = expr.args[0].value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        if isinstance(expr, cst.Attribute) and expr.attr.value == "args":
            return True
        return isinstance(expr, cst.Name) and expr.value in self._caught
