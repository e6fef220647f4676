"""CN301: ``torch.cuda.amp.autocast(...)`` -> ``torch.autocast(<device>, dtype=..., ...)``."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings, Valid

from .._shared.args import arg_by_name, as_keywords, keyword_arg
from .._shared.detector import AstDetector, may_be_linked
from .._shared.names import import_to_drop, is_reference
from .._shared.target import device_type_expr
from ._detect_ast import LegacyCall, amp_uses
from ._helpers import AMP_DTYPE_NAMES, LEGACY_AUTOCAST, dtype_expr, is_float16, wakes_on_cuda

__all__ = ["LegacyAutocast"]

# torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True): the first
# positional parameter is `enabled`, while torch.autocast's is `device_type`:
# `autocast(flag)` must become `autocast("neuron", enabled=flag)`.
_LEGACY_PARAMS = ("enabled", "dtype", "cache_enabled")
FP16_ADVICE = "the explicit float16 is kept (it works on Neuron, but bfloat16 is recommended and needs no loss scaling)"


class LegacyAutocast(Rule):
    """
    ## What it does
    Rewrites ``torch.cuda.amp.autocast(...)`` to ``torch.autocast("neuron", dtype=..., ...)``.
    Also through ``from torch.cuda import amp`` or ``from torch.cuda.amp import autocast``, and
    as a decorator. Positional arguments become keywords
    (the old API takes ``enabled`` first). The dtype comes from the ``amp-dtype`` setting
    (``bfloat16`` unless set to ``float16``) unless the call names one, which is kept.

    ## Why is this bad?
    ``torch.cuda.amp.autocast`` always means CUDA autocast (and is deprecated). On Trainium the
    region would run without mixed precision, or fail.

    ## Example
    ```python
    with torch.cuda.amp.autocast(use_amp):
        loss = model(x)
    ```
    becomes
    ```python
    with torch.autocast("neuron", dtype=torch.bfloat16, enabled=use_amp):
        loss = model(x)
    ```

    ## Fix safety
    Safe: the region keeps its meaning (autocast on the target device). The dtype is the port's
    documented precision policy: CUDA's implicit float16 becomes the ``amp-dtype`` setting
    (bfloat16 by default, as AWS recommends; ``--amp-dtype float16`` keeps float16). A dtype the
    user wrote is never changed. Calls with ``*args``/``**kwargs`` are only reported.
    """

    code = "CN301"
    name = "cuda-amp-autocast"
    fixes = frozenset({Safety.SAFE})
    triggers = ("autocast",)
    wakes = classmethod(wakes_on_cuda)
    emits = ("torch.autocast", "torch.accelerator.current_accelerator", *AMP_DTYPE_NAMES.values())
    VALID = (
        "import torch\nwith torch.autocast('neuron', dtype=torch.bfloat16):\n    pass\n",
        "import torch\nwith torch.autocast(device_type='cpu'):\n    pass\n",
        # A project's own autocast helper: not torch's, so it stays.
        "from myproject.amp import autocast\nwith autocast():\n    pass\n",
        Valid(
            "import torch\nwith torch.autocast(torch.accelerator.current_accelerator().type):\n    pass\n",
            target="accelerator",
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    y = m(x)\n",
            'import torch\nwith torch.autocast("neuron", dtype=torch.bfloat16):\n    y = m(x)\n',
        ),
        # The old autocast's first positional parameter is `enabled`, not a device type.
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(use_amp):\n    pass\n",
            'import torch\nwith torch.autocast("neuron", dtype=torch.bfloat16, enabled=use_amp):\n    pass\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(True, torch.float16):\n    pass\n",
            'import torch\nwith torch.autocast("neuron", enabled=True, dtype=torch.float16):\n    pass\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",
            'import torch\nwith torch.autocast("neuron", dtype=torch.float16):\n    pass\n',
            options=(("amp_dtype", "float16"),),
        ),
        # Through aliases (`from torch.cuda.amp import autocast`) and as a decorator.
        Invalid(
            "from torch.cuda.amp import autocast\n\n@autocast(enabled=False)\ndef f(x):\n    return x\n",
            'import torch\n\n@torch.autocast("neuron", dtype=torch.bfloat16, enabled=False)\ndef f(x):\n    return x\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda import amp\nwith amp.autocast(enabled=cfg.amp):\n    pass\n",
            'import torch\nwith torch.autocast("neuron", dtype=torch.bfloat16, enabled=cfg.amp):\n    pass\n',
        ),
        Invalid(
            "import torch as th\nwith th.cuda.amp.autocast():\n    pass\n",
            'import torch as th\nwith th.autocast("neuron", dtype=th.bfloat16):\n    pass\n',
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    pass\n",
            "import torch\nwith torch.autocast((torch.accelerator.current_accelerator() or torch.get_default_device()).type, dtype=torch.bfloat16):\n    pass\n",
            target="accelerator",
        ),
        Invalid("import torch\nwith torch.cuda.amp.autocast(**amp_kwargs):\n    pass\n"),
        Invalid("import torch, functools\nctx = functools.partial(torch.cuda.amp.autocast, enabled=False)\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor's findings from the walk CN302 and CN303 share (``_detect_ast``), for the
        calls ``_findings`` can write as libcst does; unsure at a name of the old autocast that
        is not called (``_reference``'s report is libcst's to place)."""
        uses = amp_uses(file)
        if uses is None or uses.legacy_references:
            return None
        if not uses.legacy_calls:
            return []
        return _findings(cls, file, uses.legacy_calls, settings)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member != "autocast" and not isinstance(func, cst.Name):
            return
        if self.qualname(func) not in LEGACY_AUTOCAST:
            return
        message = "`torch.cuda.amp.autocast` is CUDA-only (and deprecated)"
        args = as_keywords(node, _LEGACY_PARAMS)
        device = device_type_expr(self)
        spelled = self.spell("torch.autocast")
        if args is None or device is None or spelled is None:
            self.report(
                node,
                message,
                guidance='Write `torch.autocast("neuron", dtype=torch.bfloat16, enabled=...)`; pass '
                "enabled/dtype/cache_enabled by keyword.",
            )
            return
        device_expr, imports = device
        new_func, more = spelled
        imports += more
        head = [cst.Arg(device_expr)]
        dtype_arg = arg_by_name(args, "dtype")
        if dtype_arg is None:
            dtype = dtype_expr(self)
            if dtype is None:
                self.report(node, message, guidance="`torch` is shadowed here: write the autocast call by hand.")
                return
            head.append(keyword_arg("dtype", dtype[0]))
            imports += dtype[1]
        elif is_float16(self, dtype_arg.value) and self.context.settings.amp_dtype == "bfloat16":
            message += f"; {FP16_ADVICE}"
        self.report(
            node,
            message,
            replacement=node.with_changes(func=new_func, args=[*head, *args]),
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, func),
            description="use `torch.autocast` on the target device with an explicit dtype",
        )

    # References that are not calls (functools.partial(torch.cuda.amp.autocast, ...), aliases).
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "autocast":
            self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "autocast" and is_reference(self, node):
            self._reference(node)

    def _reference(self, node: cst.Attribute | cst.Name) -> None:
        parent = self.context.parent
        if isinstance(parent, cst.Call) and parent.func is node:
            return  # the call itself is handled by visit_Call
        if self.qualname(node) not in LEGACY_AUTOCAST:
            return
        self.report(
            node,
            "`torch.cuda.amp.autocast` is CUDA-only (and deprecated)",
            guidance='Refer to `torch.autocast` and pass `"neuron"` as the first argument and '
            "dtype=torch.bfloat16 where it is called (positional arguments of the old API are "
            "`enabled, dtype, cache_enabled`).",
            effort=Effort.LOW,
        )


_MESSAGE = "`torch.cuda.amp.autocast` is CUDA-only (and deprecated)"
_DESCRIPTION = "use `torch.autocast` on the target device with an explicit dtype"


def _findings(rule: type, file, calls: list[LegacyCall], settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
    """``visit_Call`` above for each call the walk found, on the neuron target, where it is
    written ``<torch>.cuda.amp.autocast()``: the call becomes ``<torch>.autocast("neuron",
    dtype=<amp dtype>)`` with the user's alias of torch. Unsure for any other call (arguments
    that become keywords, a from-import the fix may leave unused, spacing inside the
    parentheses), where a name needs an import, where the program pass may link the report,
    inside an f-string, and on the accelerator target."""
    from cuda2neuron.python import Unsure

    if settings.target != "neuron":
        return None
    detector = AstDetector(rule, file)
    findings = []
    try:
        for found in calls:
            call, ancestors = found.call, found.ancestors
            if not found.plain or any(isinstance(a, ast.JoinedStr) for a in ancestors) or may_be_linked(file, call, ancestors):
                return None
            start, end = file.bounds(call)
            if file.text[file.bounds(call.func)[1] : end] != "()":
                return None
            autocast, dtype = found.autocast, found.dtypes[settings.amp_dtype]
            if autocast is None or dtype is None or autocast[1] or dtype[1]:
                return None  # torch is at the call's head: neither is shadowed nor needs an import
            new = f'{autocast[0]}("neuron", dtype={dtype[0]})'
            fix = detector.edit(call, ancestors, start, end - start, new, Safety.SAFE, _DESCRIPTION)
            findings.append(detector.finding(call, _MESSAGE, "", Effort.NONE, fix))
    except Unsure:
        return None
    return findings
