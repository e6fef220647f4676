"""CN307: autocast state queries that mean CUDA (``torch.is_autocast_enabled()``, ``get_autocast_gpu_dtype``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.args import positional_args
from .._shared.selected import opened_code, selected_code
from .._shared.strings import string_value
from .._shared.target import device_type_expr, needs_newer_torch

__all__ = ["AutocastState"]

# Device-generic getters/setters: their first parameter is the device type.
_GENERIC = {
    "torch.is_autocast_enabled": 0,  # arity of the old CUDA-only form (no device argument)
    "torch.set_autocast_enabled": 1,
    "torch.get_autocast_dtype": None,  # no CUDA-only form: only "cuda" literals are rewritten
    "torch.set_autocast_dtype": None,
}
# CUDA-only names -> (generic name); they take the generic form's arguments minus the device.
_GPU_ONLY = {
    "torch.get_autocast_gpu_dtype": "torch.get_autocast_dtype",
    "torch.set_autocast_gpu_dtype": "torch.set_autocast_dtype",
}
_MEMBERS = frozenset(q.rpartition(".")[2] for q in (*_GENERIC, *_GPU_ONLY))


class AutocastState(Rule):
    """
    ## What it does
    Rewrites autocast state queries that mean CUDA to ask about the target device.
    ``torch.is_autocast_enabled()`` and ``torch.set_autocast_enabled(flag)`` without a device,
    ``torch.get_autocast_gpu_dtype()`` / ``torch.set_autocast_gpu_dtype(d)`` and the
    device-generic forms called with ``"cuda"`` become
    ``torch.is_autocast_enabled("neuron")``, ``torch.get_autocast_dtype("neuron")``, ...

    ## Why is this bad?
    Without a device these functions answer for CUDA: inside a ``torch.autocast("neuron")``
    region ``torch.is_autocast_enabled()`` is False, so code that casts its inputs by hand when
    autocast is on (attention kernels, custom layers) silently takes the fp32 path on Trainium.

    ## Example
    ```python
    if torch.is_autocast_enabled():
        q = q.to(torch.get_autocast_gpu_dtype())
    ```
    becomes
    ```python
    if torch.is_autocast_enabled("neuron"):
        q = q.to(torch.get_autocast_dtype("neuron"))
    ```

    ## Fix safety
    Safe: the question asked is the same, about the device the port runs on.
    """

    code = "CN307"
    name = "cuda-autocast-state"
    fixes = frozenset({Safety.SAFE})
    # The names of _GENERIC and _GPU_ONLY: `autocast` alone is in every file that casts by device.
    triggers = ("is_autocast_enabled", "set_autocast_enabled", "autocast_dtype", "autocast_gpu_dtype")
    emits = (
        "torch.is_autocast_enabled",
        "torch.set_autocast_enabled",
        "torch.get_autocast_dtype",
        "torch.set_autocast_dtype",
        "torch.accelerator.current_accelerator",
    )
    VALID = (
        'import torch\nok = torch.is_autocast_enabled("neuron")\n',
        "import torch\nok = torch.is_autocast_enabled(x.device.type)\n",
        'import torch\nd = torch.get_autocast_dtype("cpu")\n',
        # A project's own helper with the same name: not torch's, so it stays.
        "from mylib import is_autocast_enabled\nok = is_autocast_enabled()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nif torch.is_autocast_enabled():\n    q = q.to(torch.get_autocast_gpu_dtype())\n",
            'import torch\nif torch.is_autocast_enabled("neuron"):\n    q = q.to(torch.get_autocast_dtype("neuron"))\n',
        ),
        Invalid(
            "import torch\ntorch.set_autocast_gpu_dtype(torch.bfloat16)\ntorch.set_autocast_enabled(True)\n",
            'import torch\ntorch.set_autocast_dtype("neuron", torch.bfloat16)\ntorch.set_autocast_enabled("neuron", True)\n',
        ),
        Invalid(
            "import torch\nd = torch.get_autocast_dtype('cuda')\n",
            "import torch\nd = torch.get_autocast_dtype('neuron')\n",
        ),
        Invalid(
            "import torch\nok = torch.is_autocast_enabled()\n",
            "import torch\nok = torch.is_autocast_enabled((torch.accelerator.current_accelerator() or torch.get_default_device()).type)\n",
            target="accelerator",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member not in _MEMBERS:
            return
        qualified = self.qualname(func)
        if qualified is None or any(a.star for a in node.args):
            return
        built = device_type_expr(self)
        if built is None:
            why = needs_newer_torch(self)
            if why is not None and (qualified in _GPU_ONLY or qualified in _GENERIC):
                self.report(node, f"`{qualified}` asks about CUDA", guidance=why, effort=Effort.LOW, depends=self._selects(node), needs=opened_code(self.context.ancestors, node))
            return
        device, imports = built
        positional = positional_args(node)
        if qualified in _GPU_ONLY:
            spelled = self.spell(_GPU_ONLY[qualified])
            if spelled is None:
                return
            new_func, more = spelled
            args = [cst.Arg(device), *node.args]
            self.report(
                node,
                f"`{qualified}` asks about CUDA",
                replacement=node.with_changes(func=new_func, args=args),
                safety=Safety.SAFE,
                imports=imports + more,
                description=f"use `{_GPU_ONLY[qualified]}` with the target device",
                depends=self._selects(node), needs=opened_code(self.context.ancestors, node),
            )
            return
        if qualified not in _GENERIC:
            return
        cuda_arity = _GENERIC[qualified]
        if cuda_arity is not None and len(node.args) == cuda_arity and len(positional) == cuda_arity:
            # The device-less (CUDA) form: prepend the device type.
            args = [cst.Arg(device), *node.args]
        elif positional and string_value(positional[0].value) == "cuda" and positional[0] is node.args[0]:
            if isinstance(device, cst.SimpleString) and isinstance(positional[0].value, cst.SimpleString):
                quote = positional[0].value.value[-1]
                device = cst.SimpleString(f"{quote}neuron{quote}")
            args = [node.args[0].with_changes(value=device), *node.args[1:]]
        else:
            return
        self.report(
            node,
            f"`{qualified}` asks about CUDA",
            replacement=node.with_changes(args=args),
            safety=Safety.SAFE,
            imports=imports,
            description="ask about the target device",
            depends=self._selects(node), needs=opened_code(self.context.ancestors, node),
        )

    def _selects(self, node: cst.Call) -> tuple[cst.CSTNode, ...]:
        """``if torch.is_autocast_enabled():`` picks its branch on the answer: asked about
        Neuron, it must not stand in front of a branch still written for CUDA
        (``if t.device.type == "cuda": ... else: raise``), nor that branch move without it."""
        return selected_code(self.context.ancestors, node)
