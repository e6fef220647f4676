"""CN101: ``.cuda()`` method calls."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.engine import Invalid, Rule, Safety, Valid

from ._target import device_expr
from ._util import arg_by_name

__all__ = ["CudaMethodCall"]


class CudaMethodCall(Rule):
    """
    ## What it does
    Rewrites ``.cuda()`` on tensors and modules to ``.to(<device>)``, keeping the device index
    and ``non_blocking``.

    ## Why is this bad?
    ``.cuda()`` only ever means a CUDA device. TorchNeuron generates ``.neuron()``, but ``.to()``
    is the spelling AWS documents and the one that also works with a device variable.

    ## Example
    ```python
    model.cuda()
    x = x.cuda(non_blocking=True)
    y = y.cuda(rank)
    ```
    becomes
    ```python
    model.to("neuron")
    x = x.to("neuron", non_blocking=True)
    y = y.to(f"neuron:{rank}")
    ```

    ## Fix safety
    Safe: ``.to(device)`` is what ``.cuda(device)`` does for tensors and modules. A receiver that
    is not a torch object but has its own ``cuda`` method would be changed too; such classes are
    rare enough that suppressing the line (``# cuda2neuron: ignore[CN101]``) is the remedy.
    """

    code = "CN101"
    name = "cuda-method-call"
    triggers = ("cuda",)
    VALID = (
        "x.to('neuron')",
        "torch.cuda.is_available()",
        "cuda()",  # a plain function, not a method
        "x.cuda",  # attribute access without a call is not a placement
        Valid("x.to(torch.accelerator.current_accelerator())", target="accelerator"),
    )
    INVALID = (
        Invalid("model.cuda()\n", 'model.to("neuron")\n'),
        Invalid("x = x.cuda(non_blocking=True)\n", 'x = x.to("neuron", non_blocking=True)\n'),
        Invalid("y = y.cuda(0)\n", 'y = y.to("neuron:0")\n'),
        Invalid("y = y.cuda(rank)\n", 'y = y.to(f"neuron:{rank}")\n'),
        Invalid("y = y.cuda(device=args.gpu)\n", 'y = y.to(f"neuron:{args.gpu}")\n'),
        Invalid("z = torch.zeros(3).cuda()\n", 'z = torch.zeros(3).to("neuron")\n'),
        Invalid("y = y.cuda(cfg['gpu'])\n", "y = y.to(f\"neuron:{cfg['gpu']}\")\n"),
        # A nested double quote cannot go inside an f-string before Python 3.12.
        Invalid(
            'y = y.cuda(cfg["gpu"])\n',
            'import torch\n\ny = y.to(torch.device("neuron", cfg["gpu"]))\n',
        ),
        Invalid(
            "import torch\nm.cuda()\n",
            "import torch\nm.to(torch.accelerator.current_accelerator())\n",
            target="accelerator",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
            return
        # `torch.cuda(...)` is not a method call on a tensor; the module is not callable anyway.
        if self.qualname(func) is not None:
            return
        device_arg = arg_by_name(node, "device", position=0)
        index = device_arg.value if device_arg is not None else None
        built = device_expr(self, index)
        if built is None:
            self.report(node, "`.cuda()` places the tensor on a CUDA device")
            return
        expr, imports = built
        rest = [
            a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
            for a in node.args
            if a is not device_arg
        ]
        new_args = [cst.Arg(expr), *rest]
        replacement = node.with_changes(
            func=func.with_changes(attr=cst.Name("to")), args=new_args
        )
        self.report(
            node,
            "`.cuda()` places the tensor on a CUDA device",
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            description="replace `.cuda(...)` with `.to(<device>)`",
        )
