"""CN302: ``torch.autocast("cuda", ...)`` / ``torch.amp.autocast(device_type="cuda")``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Finding, Invalid, Rule, Safety, Settings

from .._shared.args import arg_by_name, keyword_arg
from .._shared.strings import string_value
from .._shared.target import device_type_expr
from ._detect_ast import amp_uses
from ._helpers import AMP_DTYPE_NAMES, AUTOCAST, dtype_expr, is_float16, wakes_on_cuda

__all__ = ["AutocastCudaDevice"]

FP16_ADVICE = "the explicit float16 is kept (it works on Neuron, but bfloat16 is recommended and needs no loss scaling)"


class AutocastCudaDevice(Rule):
    """
    ## What it does
    Rewrites ``torch.autocast("cuda")`` to the target device and makes the dtype explicit.
    ``torch.autocast`` / ``torch.amp.autocast`` as context manager or decorator, device
    positional or ``device_type=``, become ``torch.autocast("neuron", dtype=torch.bfloat16, ...)``. Disabled regions
    (``enabled=False``) are rewritten too.

    ## Why is this bad?
    ``torch.autocast("cuda")`` only affects CUDA tensors: on Trainium the region silently runs in
    fp32. The device string is validated even when ``enabled=False``, so a disabled CUDA
    autocast still fails on a machine without CUDA (pytorch#115900).

    ## Example
    ```python
    @torch.amp.autocast("cuda", enabled=False)
    def rope(x): ...
    with torch.autocast(device_type="cuda"):
        y = model(x)
    ```
    becomes
    ```python
    @torch.amp.autocast("neuron", dtype=torch.bfloat16, enabled=False)
    def rope(x): ...
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        y = model(x)
    ```

    ## Fix safety
    Safe: the region autocasts on the target device. Without an explicit dtype, CUDA autocast
    uses float16; the port writes the ``amp-dtype`` setting (bfloat16 by default, as AWS
    recommends). A dtype the user wrote — positional or keyword — is kept, with advice when it is
    float16. Device types held in variables are CN303's business.
    """

    code = "CN302"
    name = "autocast-cuda-device"
    fixes = frozenset({Safety.SAFE})
    triggers = ("autocast",)
    wakes = classmethod(wakes_on_cuda)
    emits = ("torch.autocast", "torch.accelerator.current_accelerator", *AMP_DTYPE_NAMES.values())
    VALID = (
        "import torch\nwith torch.autocast('cpu', dtype=torch.bfloat16):\n    pass\n",
        "import torch\nwith torch.autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        # Already portable (the device type is not "cuda"): left alone.
        "import torch\nwith torch.autocast(x.device.type):\n    pass\n",
        # "cuda" that is not the device argument: a log message.
        "import torch\nwith torch.autocast('cpu'):\n    log('cuda')\n",
        # Some other library's autocast: not torch's, so it stays.
        "from myproject import autocast\nwith autocast('cuda'):\n    pass\n",
    )
    INVALID = (
        Invalid(
            "import torch\nwith torch.autocast('cuda'):\n    pass\n",
            "import torch\nwith torch.autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        ),
        Invalid(
            'import torch\nwith torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16):\n    pass\n',
            'import torch\nwith torch.amp.autocast(device_type="neuron", dtype=torch.bfloat16):\n    pass\n',
        ),
        # Disabled regions are still validated (pytorch#115900).
        Invalid(
            'import torch\n\n@torch.amp.autocast("cuda", enabled=False)\ndef rope(x):\n    return x\n',
            'import torch\n\n@torch.amp.autocast("neuron", dtype=torch.bfloat16, enabled=False)\ndef rope(x):\n    return x\n',
        ),
        # The user's positional dtype is kept.
        Invalid(
            "import torch\nwith torch.autocast('cuda', torch.float16):\n    pass\n",
            "import torch\nwith torch.autocast('neuron', torch.float16):\n    pass\n",
        ),
        Invalid(
            "import torch\nwith torch.autocast(device_type='cuda', enabled=use_amp):\n    pass\n",
            "import torch\nwith torch.autocast(device_type='neuron', dtype=torch.float16, enabled=use_amp):\n    pass\n",
            options=(("amp_dtype", "float16"),),
        ),
        Invalid(
            "from torch import autocast\nwith autocast('cuda'):\n    pass\n",
            "from torch import autocast\nimport torch\n\nwith autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        ),
        Invalid(
            "import torch\nwith torch.autocast('cuda'):\n    pass\n",
            "import torch\nwith torch.autocast((torch.accelerator.current_accelerator() or torch.get_default_device()).type, dtype=torch.bfloat16):\n    pass\n",
            target="accelerator",
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no autocast call of torch's takes the device type "cuda" (most model code
        casts by a tensor's device type), so the visitor reports nothing; unsure elsewhere."""
        uses = amp_uses(file)
        return None if uses is None or uses.cuda_device else []

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member != "autocast" and not isinstance(func, cst.Name):
            return
        device_arg = arg_by_name(node, "device_type", position=0)
        if device_arg is None or string_value(device_arg.value) != "cuda":
            return
        if self.qualname(func) not in AUTOCAST:
            return
        message = "autocast on the CUDA device"
        built = device_type_expr(self)
        if built is None:
            self.report(node, message, guidance='Pass "neuron" as the device type.')
            return
        device, imports = built
        if self.context.settings.target == "neuron" and isinstance(device, cst.SimpleString):
            # Keep the user's quote style.
            quote = device_arg.value.value[-1] if isinstance(device_arg.value, cst.SimpleString) else '"'
            device = cst.SimpleString(f"{quote}neuron{quote}")
        # Arguments keep their commas (and the comments in them); new ones get default commas.
        args = list(node.args)
        index = node.args.index(device_arg)
        args[index] = args[index].with_changes(value=device)
        dtype_arg = arg_by_name(node, "dtype", position=1)
        if dtype_arg is None:
            if any(a.star == "**" for a in node.args):
                self.report(node, message, guidance='Pass "neuron" as the device type and dtype=torch.bfloat16.')
                return
            dtype = dtype_expr(self)
            if dtype is None:
                self.report(node, message, guidance='Pass "neuron" as the device type.')
                return
            args.insert(index + 1, keyword_arg("dtype", dtype[0]))
            imports += dtype[1]
        elif is_float16(self, dtype_arg.value) and self.context.settings.amp_dtype == "bfloat16":
            message += f"; {FP16_ADVICE}"
        self.report(
            node,
            message,
            replacement=node.with_changes(args=args),
            safety=Safety.SAFE,
            imports=imports,
            description="autocast on the target device with an explicit dtype",
        )
