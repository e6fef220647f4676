"""CN610: the ``nvtx`` package (NVIDIA Tools Extension ranges)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Safety

from .._shared.args import arg_by_name
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, in_package

__all__ = ["NvtxPackage"]

_GUIDANCE = (
    "NVTX ranges only show up in NVIDIA tools. Use torch.profiler.record_function(name) as a "
    "context manager or decorator; the Neuron profiler shows those ranges."
)
_DROPPABLE = frozenset({"message", "color", "domain", "category", "payload"})


class NvtxPackage(PackageRule):
    """
    ## What it does
    Reports the ``nvtx`` package and rewrites ``nvtx.annotate("name", color=...)`` (context
    manager or decorator) to ``torch.profiler.record_function("name")``. ``torch.cuda.nvtx`` is
    covered by the torch.cuda API rules.

    ## Why is this bad?
    NVTX is NVIDIA's annotation API for Nsight; it records nothing on Trainium.
    ``record_function`` annotates PyTorch's profiler trace on every device.

    ## Example
    ```python
    with nvtx.annotate("forward", color="green"):
        y = model(x)
    ```
    becomes
    ```python
    with torch.profiler.record_function("forward"):
        y = model(x)
    ```

    ## Fix safety
    Safe: annotations do not change what the program computes; the colour, domain and category
    have no counterpart and are dropped. ``push_range``/``pop_range`` pairs and ``annotate()``
    without a name are reported (the range must become a ``with`` block by hand).
    """

    code = "CN610"
    name = "nvtx-package"
    fixes = frozenset({Safety.SAFE})
    packages = ("nvtx",)
    triggers = ("nvtx",)
    emits = ("torch.profiler.record_function",)
    VALID = (
        "import torch\nwith torch.profiler.record_function('fwd'):\n    pass\n",
        "use_nvtx = False\n",
    )
    INVALID = (
        Invalid("import nvtx\n"),
        Invalid(
            "import nvtx\nimport torch\nwith nvtx.annotate('fwd', color='green'):\n    y = m(x)\n",
            "import torch\nwith torch.profiler.record_function('fwd'):\n    y = m(x)\n",
        ),
        Invalid(
            "import nvtx\n\n@nvtx.annotate(message='step')\ndef step():\n    pass\n",
            "import torch\n\n@torch.profiler.record_function('step')\ndef step():\n    pass\n",
        ),
        Invalid("import nvtx\nnvtx.push_range('fwd')\n"),
    )

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self._report(node, "the nvtx package annotates NVIDIA tools only")

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if not in_package(qualified, self.packages):
            return
        message = f"`{qualified}` is an NVTX range"
        if qualified == "nvtx.annotate":
            name = arg_by_name(node, "message", 0)
            ok = name is not None and not any(a.star for a in node.args)
            ok = ok and all(a is name or (a.keyword is not None and a.keyword.value in _DROPPABLE) for a in node.args)
            spelled = self.spell("torch.profiler.record_function") if ok else None
            if spelled is not None and name is not None:
                func, imports = spelled
                self.report(
                    node,
                    message,
                    replacement=cst.Call(func=func, args=[cst.Arg(name.value)]),
                    safety=Safety.SAFE,
                    guidance=_GUIDANCE,
                    imports=imports,
                    unused_imports=(("nvtx", None),),
                    description="use torch.profiler.record_function",
                )
                return
        self._report(node, message)

    def _report(self, node: cst.CSTNode, message: str) -> None:
        self.report(node, message, guidance=_GUIDANCE, effort=Effort.LOW)
