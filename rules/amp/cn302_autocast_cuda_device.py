"""CN302: ``torch.autocast("cuda", ...)`` / ``torch.amp.autocast(device_type="cuda")``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.args import arg_by_name, keyword_arg
from .._shared.detector import AstDetector, may_be_linked
from .._shared.strings import string_value
from .._shared.target import device_type_expr
from ._detect_ast import CudaAutocast, amp_uses
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
        """The visitor's findings, fixes included, from the walk CN301 and CN303 share
        (``_detect_ast``); most model code casts by a tensor's device type and gets none."""
        uses = amp_uses(file)
        if uses is None:
            return None
        if not uses.cuda_devices:
            return []
        return _findings(cls, file, uses.cuda_devices, settings)

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


_MESSAGE = "autocast on the CUDA device"
_DESCRIPTION = "autocast on the target device with an explicit dtype"
# What follows the device argument where a dtype inserted after it reads as libcst writes it
# (the argument's own comma kept, the new one ", "): the call's closing parenthesis, or ", "
# before the next argument on the same line. Other spacing, a trailing comma, a comment: libcst.
_INSERTS_CLEANLY = re.compile(r"\)|, (?=[^\s#)])")


def _findings(rule: type, file, calls: list[CudaAutocast], settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
    """``visit_Call`` above for each call the walk found, on the neuron target: the device
    literal's written text (its own parentheses included) becomes ``"neuron"`` in its quote, and
    where no dtype is passed ``, dtype=<amp dtype>`` follows it, spelled with the user's alias of
    torch. Unsure on the accelerator target, where the dtype needs an import, where the program
    pass may link the report, inside an f-string, and where the text around the literal is not
    what ``_INSERTS_CLEANLY`` reads."""
    from cuda2neuron.python import Unsure, written_bounds

    from ..device._strings_ast import simple_string

    if settings.target != "neuron":
        return None
    detector = AstDetector(rule, file)
    findings = []
    try:
        for found in calls:
            call, device, ancestors = found.call, found.device, found.ancestors
            if any(isinstance(a, ast.JoinedStr) for a in ancestors) or may_be_linked(file, call, ancestors):
                return None
            message = _MESSAGE
            insert = ""
            if not found.has_dtype:
                if found.double_star:
                    findings.append(detector.finding(call, message, 'Pass "neuron" as the device type and dtype=torch.bfloat16.', Effort.LOW))
                    continue
                dtype = found.dtypes[settings.amp_dtype]
                if dtype is None:
                    findings.append(detector.finding(call, message, 'Pass "neuron" as the device type.', Effort.LOW))
                    continue
                if dtype[1]:
                    return None  # the fix adds an import
                insert = f", dtype={dtype[0]}"
            elif found.float16 and settings.amp_dtype == "bfloat16":
                message += f"; {FP16_ADVICE}"
            value = device.value  # type: ignore[attr-defined]
            start, end = written_bounds(file, value, (*ancestors, call, device))
            if insert and not _INSERTS_CLEANLY.match(file.text, end):
                return None
            quote = file.text[file.bounds(value)[1] - 1] if simple_string(file, value) else '"'
            fix = detector.edit(call, ancestors, start, end - start, f"{quote}neuron{quote}{insert}", Safety.SAFE, _DESCRIPTION)
            findings.append(detector.finding(call, message, "", Effort.NONE, fix))
    except Unsure:
        return None
    return findings
