"""CN801: float64 on the device (Trainium has no float64; it is downcast silently)."""

from __future__ import annotations

import re
from functools import lru_cache

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import positional_args

__all__ = ["Float64OnDevice"]

_DTYPES = {"torch.float64": "float32", "torch.double": "float"}
_GUIDANCE = (
    "Trainium computes in float32 at most: float64 tensors on the neuron device are silently "
    "downcast, so code that relies on double precision gets float32 results. Use torch.float32 "
    "for device tensors; keep float64 only for host (CPU) tensors, e.g. metric accumulation."
)

# Each pattern starts with a literal word, which the regex engine finds fast; none looks at what
# comes before it, so ``mytorch.float64`` wakes the rule too (the parse then says no).
_DOUBLE_CALL = re.compile(rb"double[ \t\\]*\([\s\\]*\)")
_FROM_TORCH = re.compile(rb"from[ \t\\]+torch[ \t\\]+import")
# A name imported from torch is used as itself: the whole word (not `double_self_attention`).
_BARE_NAME = re.compile(rb"\b(?:float64|double)\b")
_TORCH_ALIAS = re.compile(rb"torch[ \t\\]+as[ \t\\]+([A-Za-z_\x80-\xff][\w\x80-\xff]*)")


@lru_cache(maxsize=64)
def _dtype_attribute(head: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(head) + rb"[ \t\\]*\.[ \t\\]*(?:float64|double)\b")


class Float64OnDevice(Rule):
    """
    ## What it does
    Reports ``torch.float64`` / ``torch.double`` (as a ``dtype=``, in ``.to(...)``,
    ``torch.set_default_dtype(...)``) and ``.double()`` calls; the unsafe fix writes float32.

    ## Why is this bad?
    Trainium has no float64 arithmetic: the device keeps float64 tensors as float32 without an
    error. Results that need double precision (numerically delicate losses, reference checks
    with tight tolerances) silently lose it; AWS advises float32 (and int32).

    ## Example
    ```python
    x = torch.zeros(3, dtype=torch.float64, device=device)
    y = y.double()
    ```
    becomes (unsafe fix)
    ```python
    x = torch.zeros(3, dtype=torch.float32, device=device)
    y = y.float()
    ```

    ## Fix safety
    Unsafe: the rule cannot tell device tensors from host tensors, and for host tensors the fix
    really does lower precision. On the device it writes down what already happens.
    """

    code = "CN801"
    name = "float64-on-device"
    advisory = True  # float64 runs on the device, in float32: never holds back a group of linked fixes
    fixes = frozenset({Safety.UNSAFE})
    triggers = ("float64", "double")
    emits = ("torch.float32", "torch.float")
    VALID = (
        "import torch\nx = torch.zeros(3, dtype=torch.float32)\n",
        "import numpy as np\na = np.zeros(3, dtype=np.float64)\n",  # host NumPy
        "x = obj.double(2)\n",  # not the tensor method (it takes no argument)
        'print("double-check the float64 results")\n',
    )
    INVALID = (
        Invalid(
            "import torch\nx = torch.zeros(3, dtype=torch.float64)\n",
            "import torch\nx = torch.zeros(3, dtype=torch.float32)\n",
            unsafe=True,
        ),
        Invalid(
            "import torch as th\nth.set_default_dtype(th.double)\n",
            "import torch as th\nth.set_default_dtype(th.float)\n",
            unsafe=True,
        ),
        Invalid("y = y.double()\n", "y = y.float()\n", unsafe=True),
        Invalid("import torch\nx = x.to(torch.float64)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # NumPy's float64 is everywhere in model code and never reported: a report needs torch's
        # float64/double (through ``torch``, an alias of it, or ``from torch import``) or a
        # ``.double()`` call.
        if _DOUBLE_CALL.search(code) or (_FROM_TORCH.search(code) and _BARE_NAME.search(code)):
            return True
        heads = {b"torch", *(m.group(1) for m in _TORCH_ALIAS.finditer(code))}
        return any(_dtype_attribute(head).search(code) for head in heads)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        attr = node.attr.value
        if attr in ("float64", "double"):
            qualified = self.qualname(node)
            if qualified in _DTYPES:
                self._report(
                    node,
                    f"`{qualified}` on the neuron device is silently computed in float32",
                    node.with_changes(attr=cst.Name(_DTYPES[qualified])),
                )

    def visit_Name(self, node: cst.Name) -> None:
        # `from torch import float64` then `x.to(float64)`: the bare name, not the attribute part
        # of `torch.float64` (handled above) nor the name inside the import statement.
        if node.value not in ("float64", "double"):
            return
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            return
        qualified = self.qualname(node)
        if qualified in _DTYPES:
            # No fix: the float32 name would need its own import; the message says what to use.
            self.report(
                node,
                f"`{qualified}` on the neuron device is silently computed in float32",
                guidance=_GUIDANCE,
                effort=Effort.LOW,
            )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "double") or positional_args(node) or node.args:
            return
        if self.qualname(func) is not None:
            return  # a module function, not the tensor method
        self._report(
            node,
            "`.double()` makes a float64 tensor, which the neuron device computes in float32",
            node.with_changes(func=func.with_changes(attr=cst.Name("float"))),
        )

    def _report(self, node: cst.CSTNode, message: str, replacement: cst.CSTNode) -> None:
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            description="use float32",
        )
