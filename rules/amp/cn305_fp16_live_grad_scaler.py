"""CN305: a live GradScaler on the target device under ``amp-dtype = "float16"``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Valid

from .._shared.args import arg_by_name
from .._shared.strings import string_value
from ._helpers import LIBRARY_SCALER_NAMES, LIBRARY_SCALERS, SCALER

__all__ = ["Fp16LiveScaler"]

_FP16 = (("amp_dtype", "float16"),)


class Fp16LiveScaler(Rule):
    """
    ## What it does
    Warns about a live GradScaler on the target device when ``amp-dtype`` is float16.
    That is ``torch.amp.GradScaler("neuron")`` (or the accelerator's device type) without
    ``enabled=False``, and the library scalers CN304 moves (``ShardedGradScaler``, timm's
    ``NativeScaler``) on the target device.

    ## Why is this bad?
    Dynamic loss scaling with float16 on Neuron is not covered by AWS's documentation (bfloat16
    is the recommended type and needs no scaler); its inf/NaN checks and skipped steps have not
    been verified on the device, so the training run may diverge from the CUDA one.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("neuron")  # with amp-dtype = "float16"
    ```
    is reported: validate the port (``cuda2neuron validate``) or switch the project to bfloat16
    (``amp-dtype = "bfloat16"``), which turns the scaler into a disabled no-op.

    ## Fix safety
    Display only: a warning about an unverified combination, nothing to rewrite.
    """

    code = "CN305"
    name = "fp16-live-grad-scaler"
    triggers = ("GradScaler", "NativeScaler")
    VALID = (
        # bfloat16 (the default): nothing to warn about.
        'import torch\nscaler = torch.amp.GradScaler("neuron")\n',
        Valid('import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n', options=_FP16),
        Valid('import torch\nscaler = torch.amp.GradScaler("cpu")\n', options=_FP16),
    )
    INVALID = (
        Invalid('import torch\nscaler = torch.amp.GradScaler("neuron")\n', options=_FP16),
        Invalid('import torch\nscaler = torch.amp.GradScaler("neuron", enabled=use_amp)\n', options=_FP16),
        # timm's NativeScaler has no enabled= switch: on the target device it is always live.
        Invalid('from timm.utils import NativeScaler\nloss_scaler = NativeScaler(device="neuron")\n', options=_FP16),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler(torch.accelerator.current_accelerator().type)\n",
            options=_FP16,
            target="accelerator",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.settings.amp_dtype != "float16":
            return
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member != "GradScaler" and member not in LIBRARY_SCALER_NAMES and not isinstance(func, cst.Name):
            return
        device = arg_by_name(node, "device", position=0)
        if device is None or not self._is_target_device(device.value):
            return
        enabled = arg_by_name(node, "enabled", position=5)
        if enabled is not None and isinstance(enabled.value, cst.Name) and enabled.value.value == "False":
            return
        qualified = self.qualname(func)
        if qualified not in SCALER and qualified not in LIBRARY_SCALERS:
            return
        self.report(
            node,
            "float16 with a live GradScaler on Neuron is unverified",
            guidance="Check the port with `cuda2neuron validate`, or use bfloat16 "
            '(amp-dtype = "bfloat16"): no loss scaling needed, the scaler becomes enabled=False.',
            effort=Effort.LOW,
        )

    def _is_target_device(self, expr: cst.BaseExpression) -> bool:
        if string_value(expr) == "neuron":
            return True
        # The accelerator target's device type: torch.accelerator.current_accelerator().type
        return (
            isinstance(expr, cst.Attribute)
            and expr.attr.value == "type"
            and isinstance(expr.value, cst.Call)
            and self.qualname(expr.value.func) == "torch.accelerator.current_accelerator"
        )
