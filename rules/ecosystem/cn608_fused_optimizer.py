"""CN608: ``fused=True`` optimizers (no fused optimizer kernels on Neuron)."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, search_unjoined
from cuda2neuron.python import visit_syntax

from .._shared.args import arg_by_name, remove_arg
from .._shared.names import call_qualname, terminal_name
from .._shared.packages import in_package
from ._helpers import compares_to_cuda

__all__ = ["FusedOptimizer"]

_GUIDANCE = (
    "Neuron has no fused optimizer kernels: drop fused= (or pass fused=False); torch then uses "
    "its for-each implementation, the same update. Keep a CUDA-only choice as a comparison with "
    "'cuda' that is False on Neuron."
)


# What every report starts from: a `fused=` keyword, or an assignment to a name holding "fused".
_FUSED_ASSIGNED = re.compile(rb"(?i)fused\w*\s*=(?!=)")
# The keyword itself (arg_by_name matches it exactly, lowercase); the word boundary before it is
# read back by hand (``_fused_keyword``): a leading ``\b`` made the engine try every byte.
_FUSED_KEYWORD = re.compile(rb"fused\s*=(?!=)")


def _fused_keyword(code: bytes) -> bool:
    """Does ``code`` hold ``fused=`` (not ``==``) with no word byte before ``fused``?"""
    return search_unjoined(_FUSED_KEYWORD, code)


class _Bindings(cst.CSTVisitor):
    """The values assigned to ``name`` (``name = value``, also as one target of several)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.values: list[cst.BaseExpression] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in node.targets):
            self.values.append(node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name and node.value is not None:
            self.values.append(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.values.append(node.value)


class FusedOptimizer(Rule):
    """
    ## What it does
    Removes ``fused=True`` (and ``fused=<a test for CUDA>``, like ``fused=device_type ==
    "cuda"``) from ``torch.optim`` constructors, sets ``use_fused``-style flags computed from a
    CUDA test to ``False``, and reports ``fused=`` values it cannot judge (a variable,
    ``dict(fused=True)`` passed as ``**extra_args``).

    ## Why is this bad?
    ``fused=True`` selects a single-kernel optimizer step that exists for CUDA (and a few other
    devices), not for Neuron. What makes it easy to miss: LLM trainers write ``fused=device_type == "cuda"``;
    once the device rules turn the ``"cuda"`` there into ``"neuron"``, the port asks for a fused
    kernel that does not exist.

    ## Example
    ```python
    opt = torch.optim.AdamW(groups, lr=lr, fused=device.type == "cuda")
    ```
    becomes
    ```python
    opt = torch.optim.AdamW(groups, lr=lr)
    ```

    ## Fix safety
    Safe for ``--target neuron``: a test for CUDA is False in the ported program, and
    ``fused=True`` has no Neuron kernel; the non-fused implementation computes the same update.
    The fix spans the whole call (or assignment), so it runs before the device rules can turn
    ``"cuda"`` into ``"neuron"`` inside it. With ``--target accelerator`` fused kernels still help
    on CUDA: reported only.
    """

    code = "CN608"
    name = "fused-optimizer"
    fixes = frozenset({Safety.SAFE})
    # Trigger words are matched case-sensitively; flags are judged case-insensitively
    # (`USE_FUSED = device == "cuda"`).
    triggers = ("fused", "Fused", "FUSED")
    VALID = (
        "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3)\n",
        "import torch\nopt = torch.optim.AdamW(ps, fused=False)\n",
        "x = my_kernel(fused=True)\n",  # not an optimizer
        "fused = 'yes'\n",
        # A flag the port set to False (`use_fused = False`): the fused branch is dead.
        "use_fused = False\nextra_args = dict(fused=True) if use_fused else dict()\n",
        "import torch\n\ndef opt(ps):\n    use_fused = False\n    return torch.optim.AdamW(ps, fused=use_fused)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3, fused=True)\n",
            "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3)\n",
        ),
        Invalid(
            "from torch.optim import AdamW\nopt = AdamW(ps, fused=device.type == 'cuda', lr=1e-3)\n",
            "from torch.optim import AdamW\nopt = AdamW(ps, lr=1e-3)\n",
        ),
        Invalid(
            "use_fused = fused_available and device_type == 'cuda'\n",
            "use_fused = False\n",
        ),
        Invalid("import torch\nopt = torch.optim.Adam(ps, fused=use_fused)\n"),
        Invalid("extra_args = dict(fused=True) if use_fused else dict()\n"),
        Invalid("use_fused = args.fused\nextra_args = dict(fused=True) if use_fused else dict()\n"),
        Invalid("import torch\nopt = torch.optim.AdamW(ps, fused=True)\n", target="accelerator"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # `fuse_qkv_projections()`, `if attn.fused_projections:` and tests named *_fused_* hold
        # the word and never set a flag. A flag is only reported when its value tests for CUDA
        # (`"cuda"`, `.is_cuda`, `torch.cuda.is_available()`): without the word "cuda" in the
        # code only a `fused=` keyword can fire (`fused_qkv_weight = sd.pop(k)`: 22 diffusers files).
        if _fused_keyword(code):
            return True
        return b"cuda" in code and _FUSED_ASSIGNED.search(code) is not None

    def _always_false(self, name: str) -> bool:
        """Is ``name`` bound only to ``False`` in the scope that reads it (``use_fused = False``,
        which the port itself may have written)? Then ``fused=use_fused`` and a branch taken
        when it is true (``dict(fused=True) if use_fused else dict()``) are dead on Neuron."""
        scope = next((a for a in reversed(self.context.ancestors) if isinstance(a, cst.FunctionDef)), None)
        finder = _Bindings(name)
        visit_syntax(scope if scope is not None else self.context.module, finder)
        if scope is not None and any(p.name.value == name for p in (*scope.params.params, *scope.params.kwonly_params, *scope.params.posonly_params)):
            return False
        return bool(finder.values) and all(isinstance(v, cst.Name) and v.value == "False" for v in finder.values)

    def _dead(self, node: cst.Call) -> bool:
        """``dict(fused=True)`` in the branch of ``x if use_fused else y`` that a flag bound only
        to False never takes."""
        parent = self.context.parent
        if isinstance(parent, cst.IfExp) and parent.body is node:
            test = parent.test
            if isinstance(test, cst.Name):
                return test.value == "False" or self._always_false(test.value)
        return False

    def visit_Call(self, node: cst.Call) -> None:
        fused = arg_by_name(node, "fused")
        if fused is None:
            return
        if isinstance(node.func, cst.Name) and node.func.value == "dict":
            value = fused.value
            if isinstance(value, cst.Name) and (value.value == "False" or self._always_false(value.value)):
                return
            if not self._dead(node):
                self.report(node, "`fused=` is collected for an optimizer", guidance=_GUIDANCE, effort=Effort.LOW)
            return
        if terminal_name(node.func) is None or not in_package(call_qualname(self, node), ("torch.optim",)):
            return
        value = fused.value
        if isinstance(value, cst.Name) and (value.value in ("False", "None") or self._always_false(value.value)):
            return
        message = "fused optimizer kernels do not exist on Neuron"
        fixable = (isinstance(value, cst.Name) and value.value == "True") or compares_to_cuda(value, self)
        if not fixable or self.context.settings.target != "neuron":
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        self.report(
            node,
            message,
            replacement=remove_arg(node, fused),
            safety=Safety.SAFE,
            guidance=_GUIDANCE,
            description="drop fused=",
        )

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        name = target.attr.value if isinstance(target, cst.Attribute) else getattr(target, "value", None)
        if not isinstance(name, str) or "fused" not in name.lower() or not compares_to_cuda(node.value, self):
            return
        message = f"`{name}` turns on fused optimizer kernels for CUDA"
        if self.context.settings.target != "neuron":
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
            return
        self.report(
            node,
            message,
            replacement=node.with_changes(value=cst.Name("False")),
            safety=Safety.SAFE,
            guidance=_GUIDANCE,
            description="no fused kernels on Neuron",
        )
