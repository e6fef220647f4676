"""CN303: autocast / GradScaler whose device type is a variable in a file that still says "cuda"."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Valid

from .._shared.args import arg_by_name
from ._helpers import AUTOCAST, SCALER, mentions_cuda_literal, wakes_on_cuda

__all__ = ["AmpDeviceVariable"]

# (qualified names, device parameter name) per API; the device is the first parameter of both.
_APIS = ((AUTOCAST, "device_type"), (SCALER, "device"))
_MEMBERS = frozenset({"autocast", "GradScaler"})


def _is_variable(expr: cst.BaseExpression) -> bool:
    """A plain name or attribute chain (``device_type``, ``self.cfg.device``).

    ``x.device.type`` is the robust, data-driven form and is not reported; expressions through
    calls (``torch.accelerator.current_accelerator().type``) are already portable.
    """
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "type":
            return False
        node: cst.BaseExpression = expr
        while isinstance(node, cst.Attribute):
            node = node.value
        return isinstance(node, cst.Name)
    return False


class AmpDeviceVariable(Rule):
    """
    ## What it does
    Reports autocast and GradScaler device types held in variables while the file still says "cuda".
    That is ``torch.autocast(device_type=<variable>)`` and ``torch.amp.GradScaler(<variable>)``
    in a file that still contains a ``"cuda"`` string literal.

    ## Why is this bad?
    The device type is often derived from a string: training scripts compute
    ``device_type = "cuda" if "cuda" in device else "cpu"`` and pass the variable to autocast.
    Nothing at the autocast call says "cuda", yet on Trainium the region runs in fp32 (or on the
    wrong device) unless the string the variable comes from was ported too. The device rules
    (CN1xx) rewrite the literal where they can; this finding points at the call that depends on
    it, so a literal they could not prove to be a device is not missed.

    ## Example
    ```python
    device_type = "cuda" if "cuda" in device else "cpu"
    ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    ```
    The autocast line is reported until no ``"cuda"`` literal is left in the file.

    ## Fix safety
    Display only: the value is computed elsewhere; once the file holds no ``"cuda"`` literal the
    finding disappears (ported code checks clean).
    """

    code = "CN303"
    name = "amp-device-variable"
    advisory = True  # a hint about a variable: the autocast call runs on the target: never holds back a group of linked fixes
    triggers = ("autocast", "GradScaler")
    wakes = classmethod(wakes_on_cuda)
    VALID = (
        # Nothing left that says cuda: the variable holds the ported value.
        "import torch\ndevice_type = 'neuron' if 'neuron' in device else 'cpu'\n"
        "ctx = torch.autocast(device_type=device_type)\n",
        # Data-driven, robust form.
        "import torch\ndevice = 'cuda'\nctx = torch.autocast(x.device.type)\n",
        # Already portable (the variable is not a "cuda" literal): left alone.
        "import torch\nlog('cuda')\nctx = torch.autocast(torch.accelerator.current_accelerator().type)\n",
        Valid("import torch\nd = 'cuda'\nctx = torch.autocast('cpu')\n"),
    )
    INVALID = (
        Invalid(
            "import torch\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n"
            "ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)\n"
        ),
        Invalid("import torch\nDEVICE = 'cuda'\nscaler = torch.amp.GradScaler(DEVICE)\n"),
        Invalid("import torch\n\n@torch.autocast(self_cfg.device, enabled=False)\ndef f():\n    return 'cuda:0'\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member not in _MEMBERS:
            return
        for names, param in _APIS:
            device = arg_by_name(node, param, position=0)
            if device is None or not _is_variable(device.value):
                continue
            if self.qualname(func) not in names or not mentions_cuda_literal(self):
                continue
            variable = self.context.code(device.value)
            self.report(
                device,
                f"device type taken from `{variable}` in a file that still says \"cuda\"",
                guidance=f"Make sure `{variable}` holds \"neuron\" on Trainium: port the string it is "
                f"computed from (e.g. `device_type = \"neuron\" if \"neuron\" in device else \"cpu\"`), "
                "or derive it from a tensor with `x.device.type`.",
                effort=Effort.LOW,
            )
            return
