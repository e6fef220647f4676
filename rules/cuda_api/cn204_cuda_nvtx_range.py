"""CN204: NVTX ranges -> ``torch.profiler.record_function``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid

from .._shared.args import positional_args
from .._shared.names import import_to_drop
from ._helpers import MemberReferences

__all__ = ["NvtxRange"]

_NVTX = "torch.cuda.nvtx."
_RECORD = "torch.profiler.record_function"
_MEMBERS = frozenset({"range", "range_push", "range_pop", "range_start", "range_end", "mark"})
_GUIDANCE = {
    "range_push": "Wrap the region in `with torch.profiler.record_function(\"name\"):` instead of "
    "the range_push/range_pop pair.",
    "range_pop": "Remove it together with its range_push; use `with torch.profiler.record_function(\"name\"):`.",
    "range_start": "Use `with torch.profiler.record_function(\"name\"):` around the region.",
    "range_end": "Remove it together with its range_start; use `with torch.profiler.record_function(\"name\"):`.",
    "mark": "Use a zero-length `with torch.profiler.record_function(\"name\"): pass`, or drop the marker.",
    "range": "Use `torch.profiler.record_function(msg.format(...))`: it takes one name.",
}


class NvtxRange(MemberReferences, Rule):
    """
    ## What it does
    Rewrites NVTX ranges to ``torch.profiler.record_function`` and reports the other NVTX calls.
    ``torch.cuda.nvtx.range("name")`` (context manager or decorator) is rewritten;
    ``range_push``/``range_pop``, ``range_start``/``range_end`` and ``mark`` are reported with
    the ``record_function`` form to use instead.

    ## Why is this bad?
    NVTX annotates the CUDA timeline for Nsight; there is no NVTX on Trainium.
    ``torch.profiler.record_function`` labels the same region in the PyTorch profiler on every
    device.

    ## Example
    ```python
    with torch.cuda.nvtx.range("forward"):
        y = model(x)
    ```
    becomes
    ```python
    with torch.profiler.record_function("forward"):
        y = model(x)
    ```

    ## Fix safety
    Safe for ``range`` with a single name argument: both are annotation-only context managers
    (and decorators). A ``range`` with format arguments and the push/pop style are reported:
    turning a push/pop pair into a ``with`` block moves code.
    """

    code = "CN204"
    name = "cuda-nvtx-range"
    fixes = frozenset({Safety.SAFE})
    members = _MEMBERS
    triggers = ("nvtx",)
    emits = (_RECORD,)
    VALID = (
        "import torch\nwith torch.profiler.record_function('fwd'):\n    pass\n",
        "import nvtx\nwith nvtx.annotate('fwd'):\n    pass\n",  # the standalone nvtx package
        Valid("from torch.cuda import nvtx\nr = plan.range(3)\n"),
    )
    INVALID = (
        Invalid(
            "import torch\nwith torch.cuda.nvtx.range('fwd'):\n    y = m(x)\n",
            "import torch\nwith torch.profiler.record_function('fwd'):\n    y = m(x)\n",
        ),
        Invalid(
            "import torch\nfrom torch.cuda import nvtx\n\n@nvtx.range('step')\ndef step():\n    pass\n",
            "import torch\n\n@torch.profiler.record_function('step')\ndef step():\n    pass\n",
        ),
        Invalid(
            "from torch.cuda import nvtx\nwith nvtx.range('fwd'):\n    pass\n",
            "import torch\n\nwith torch.profiler.record_function('fwd'):\n    pass\n",
            target="accelerator",
        ),
        Invalid("import torch\ntorch.cuda.nvtx.range_push('fwd')\ny = m(x)\ntorch.cuda.nvtx.range_pop()\n"),
        Invalid("import torch\nwith torch.cuda.nvtx.range('step {}', i):\n    pass\n"),
    )

    def check_reference(self, node: cst.Attribute | cst.Name) -> None:
        qualified = self.qualname(node)
        if qualified is None or not qualified.startswith(_NVTX):
            return
        member = qualified[len(_NVTX):]
        if member not in _MEMBERS:
            return
        message = f"`{qualified}`: there is no NVTX on Trainium"
        parent = self.context.parent
        call = parent if isinstance(parent, cst.Call) and parent.func is node else None
        spelled = self.spell(_RECORD)
        if member == "range" and call is not None and spelled is not None and _single_name_arg(call):
            func, imports = spelled
            self.report(
                node,
                message,
                replacement=func,
                safety=Safety.SAFE,
                imports=imports,
                unused_imports=import_to_drop(self, node),
                description=f"use `{_RECORD}`",
            )
            return
        self.report(node, message, guidance=_GUIDANCE[member], effort=Effort.LOW)


def _single_name_arg(call: cst.Call) -> bool:
    return len(call.args) == 1 and len(positional_args(call)) == 1
