"""CN304: CUDA GradScalers -> ``torch.amp.GradScaler(<device>, ...)`` (disabled under bfloat16)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid
from cuda2neuron.python import dotted_name

from .._shared.args import arg_by_name, as_keywords, keyword_arg
from .._shared.names import import_to_drop, is_reference
from .._shared.strings import string_value
from .._shared.target import device_type_expr
from ._helpers import LEGACY_SCALER, LIBRARY_SCALER_NAMES, LIBRARY_SCALERS, SCALER, LibraryScaler, mentions_float16

__all__ = ["GradScalerDevice"]

# torch.cuda.amp.GradScaler has no device parameter; torch.amp.GradScaler takes it first.
_LEGACY_PARAMS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
_PARAMS = ("device", *_LEGACY_PARAMS)
FP16_WARNING = "float16 with a live GradScaler on Neuron is unverified: check the port with `cuda2neuron validate`"
FP16_KEPT_NOTE = (
    "kept as written (not disabled): this file also mentions float16, whose gradients need loss scaling"
)
BF16_NOTE = "bfloat16 needs no loss scaling: the scaler stays in place as a disabled no-op (scale/step/update keep working)"


class GradScalerDevice(Rule):
    """
    ## What it does
    Rewrites CUDA GradScalers to ``torch.amp.GradScaler(<device>)``, disabled under bfloat16.
    That is ``torch.cuda.amp.GradScaler(...)`` (also via ``from torch.cuda import amp`` /
    ``from torch.cuda.amp import GradScaler``) and ``torch.amp.GradScaler("cuda")`` — whose
    device defaults to ``"cuda"`` when omitted — to ``torch.amp.GradScaler(<device>, ...)``.
    With the default ``amp-dtype`` bfloat16 the scaler is disabled:
    ``torch.amp.GradScaler("neuron", enabled=False)`` — unless its file mentions float16, where
    it keeps the user's ``enabled=`` (see Fix safety). With ``amp-dtype float16`` it stays live
    and the finding carries a warning (see CN305).

    Library scalers whose device defaults to ``"cuda"`` get the same policy:
    ``ShardedGradScaler()`` (FSDP) becomes ``ShardedGradScaler(device="neuron", enabled=False)``;
    timm's ``NativeScaler()`` becomes ``NativeScaler(device="neuron")`` (it has no ``enabled``
    switch, so it stays live; with bfloat16 its power-of-two scaling changes no value).

    ## Why is this bad?
    A CUDA GradScaler keeps its state on the CUDA device and fails (or silently disables itself)
    on Trainium. Loss scaling exists to keep float16 gradients from underflowing; bfloat16 has
    float32's exponent range and needs none (AWS documents bf16 as the recommended type).

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler(enabled=use_amp)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    ```
    becomes
    ```python
    scaler = torch.amp.GradScaler("neuron", enabled=False)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    ```
    A disabled scaler's ``scale(loss)`` returns the loss unchanged, ``step(opt)`` just calls
    ``opt.step()`` and ``update()`` does nothing, so the training loop keeps its shape.

    ## Fix safety
    Safe: it follows the port's precision policy (``amp-dtype``): under bfloat16 the autocast
    rules emit bf16 regions, for which scaling is unnecessary, so the user's ``enabled=``
    expression is replaced by ``False`` (the message says so). What makes it easy to miss: the port keeps a dtype
    the user wrote, so a file that still runs float16 (``dtype=torch.float16``, or a runtime
    choice such as nanoGPT's ``enabled=(dtype == "float16")``) would lose the loss scaling its
    float16 gradients need. When the scaler's file mentions float16 in its code (``torch.float16``
    / ``torch.half`` under any alias, ``.half()``, a string value such as ``"float16"`` or
    ``"fp16"``; never a comment, docstring or prose string such as a help text) the
    scaler is therefore only moved to the target device, ``enabled=`` kept as written. A float16
    dtype chosen in *another* file (a config) is not seen: set ``amp-dtype = "float16"`` for such
    a project. Positional arguments of the old API are moved to keywords (the new API takes the
    device first). Calls with ``*args``/``**kwargs`` are reported only; so are references that
    are not calls, annotations or ``isinstance`` checks.
    """

    code = "CN304"
    name = "cuda-grad-scaler"
    fixes = frozenset({Safety.SAFE})
    triggers = ("GradScaler", "NativeScaler")
    emits = (
        "torch.amp.GradScaler",
        "torch.accelerator.current_accelerator",
        "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    )
    VALID = (
        'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
        'import torch\nscaler = torch.amp.GradScaler("cpu")\n',
        # A project's own scaler class: not torch's, so it stays.
        "from myproject.amp import GradScaler\nscaler = GradScaler()\n",
        "from myproject.utils import NativeScaler\nscaler = NativeScaler()\n",
        'from timm.utils import NativeScaler\nscaler = NativeScaler(device="cpu")\n',
        Valid(
            "import torch\nscaler = torch.amp.GradScaler(torch.accelerator.current_accelerator().type)\n",
            target="accelerator",
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
        ),
        # The file may run float16 (nanoGPT's runtime choice): the user's enabled= stays.
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=(dtype == 'float16'))\n",
            "import torch\nscaler = torch.amp.GradScaler(\"neuron\", enabled=(dtype == 'float16'))\n",
        ),
        Invalid(
            "import torch\nwith torch.autocast('cuda', dtype=torch.half):\n    pass\nscaler = torch.amp.GradScaler('cuda')\n",
            # (the autocast line is CN302's)
            "import torch\nwith torch.autocast('cuda', dtype=torch.half):\n    pass\nscaler = torch.amp.GradScaler('neuron')\n",
        ),
        # Prose is not code: a help text, a comment or a docstring about half precision does
        # not make the file run float16 (the scaler is disabled under bfloat16).
        Invalid(
            '"""Trains with mixed (half) precision."""\nimport torch\n'
            'p.add_argument("--amp", action="store_true", help="half precision float16 training")\n'
            "# fp16 used to need this\nscaler = torch.cuda.amp.GradScaler(enabled=args.amp)\n",
            '"""Trains with mixed (half) precision."""\nimport torch\n'
            'p.add_argument("--amp", action="store_true", help="half precision float16 training")\n'
            '# fp16 used to need this\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
        ),
        # Code that selects float16 does count: an option's value, `.half()`, an aliased dtype.
        Invalid(
            "import torch\np.add_argument('--dtype', default='fp16')\nscaler = torch.cuda.amp.GradScaler()\n",
            "import torch\np.add_argument('--dtype', default='fp16')\nscaler = torch.amp.GradScaler(\"neuron\")\n",
        ),
        Invalid(
            "import torch\nmodel = model.half()\nscaler = torch.cuda.amp.GradScaler()\n",
            "import torch\nmodel = model.half()\nscaler = torch.amp.GradScaler(\"neuron\")\n",
        ),
        Invalid(
            "from torch import float16 as f16\nimport torch\nx = y.to(f16)\nscaler = torch.cuda.amp.GradScaler()\n",
            "from torch import float16 as f16\nimport torch\nx = y.to(f16)\nscaler = torch.amp.GradScaler(\"neuron\")\n",
        ),
        # Through a module alias: `from torch.cuda import amp` then `amp.GradScaler()`.
        Invalid(
            "import torch\nfrom torch.cuda import amp\nscaler = amp.GradScaler()\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=False)\n',
        ),
        Invalid(
            "from torch.cuda.amp import GradScaler\nscaler = GradScaler(2.0**16)\n",
            'import torch\n\nscaler = torch.amp.GradScaler("neuron", init_scale=2.0**16, enabled=False)\n',
        ),
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('cuda')\n",
            "import torch\nscaler = torch.amp.GradScaler('neuron', enabled=False)\n",
        ),
        # torch.amp.GradScaler's device defaults to "cuda".
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler(init_scale=1024)\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron", init_scale=1024, enabled=False)\n',
        ),
        # float16: the scaler stays live (CN305 warns).
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
            'import torch\nscaler = torch.amp.GradScaler("neuron", enabled=use_amp)\n',
            options=(("amp_dtype", "float16"),),
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            "import torch\nscaler = torch.amp.GradScaler((torch.accelerator.current_accelerator() or torch.get_default_device()).type, enabled=False)\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\ndef fit(scaler: torch.cuda.amp.GradScaler):\n    pass\n",
            "import torch\ndef fit(scaler: torch.amp.GradScaler):\n    pass\n",
        ),
        # Library scalers whose device defaults to "cuda".
        Invalid(
            "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\nscaler = ShardedGradScaler()\n",
            'from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\nscaler = ShardedGradScaler(device="neuron", enabled=False)\n',
        ),
        Invalid(
            "from timm.utils import NativeScaler\nloss_scaler = NativeScaler()\n",
            'from timm.utils import NativeScaler\nloss_scaler = NativeScaler(device="neuron")\n',
        ),
        Invalid("import torch\nscaler = torch.cuda.amp.GradScaler(**cfg)\n"),
        Invalid("import torch\nmake = torch.cuda.amp.GradScaler\n"),
        # mmengine: the scaler class is picked per device at import time, CUDA last.
        Invalid(
            "if is_npu_available():\n    from torch.npu.amp import GradScaler\nelse:\n"
            "    from torch.cuda.amp import GradScaler\nscaler_type = GradScaler\n"
        ),
        Invalid(
            "if new_torch:\n    from torch.amp import GradScaler\nelse:\n"
            "    from torch.cuda.amp import GradScaler\ndef save(scaler: GradScaler):\n    pass\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member != "GradScaler" and member not in LIBRARY_SCALER_NAMES and not isinstance(func, cst.Name):
            return
        qualified = self.qualname(func)
        if qualified in LEGACY_SCALER:
            self._rewrite(node, _LEGACY_PARAMS, device_keyword=False)
        elif qualified in SCALER or qualified in LIBRARY_SCALERS:
            library = LIBRARY_SCALERS.get(qualified or "")
            device = next((a for a in node.args if a.keyword is None and not a.star), None)
            device = device or arg_by_name(list(node.args), "device")
            if device is None and any(a.star for a in node.args):
                return  # **kwargs may carry the device: unknowable
            if device is not None and string_value(device.value) != "cuda":
                return
            params = library.params if library is not None else _PARAMS
            # A library scaler keeps its own name; its device goes in as a keyword when it had none
            # (timm's NativeScaler() is called without arguments in every trainer built on it).
            keyword = device is not None and device.keyword is not None or (library is not None and device is None)
            self._rewrite(node, params, device_keyword=keyword, library=library)

    def _rewrite(
        self, node: cst.Call, params: tuple[str, ...], device_keyword: bool, library: LibraryScaler | None = None
    ) -> None:
        message = "GradScaler for the CUDA device"
        if library is not None:
            message = f"`{self.context.code(node.func)}` is a GradScaler whose device defaults to \"cuda\""
        args = as_keywords(node, params)
        built = device_type_expr(self)
        spelled = self.spell("torch.amp.GradScaler") if library is None else (node.func, ())
        if args is None or built is None or spelled is None:
            self.report(
                node,
                message,
                guidance='Write `torch.amp.GradScaler("neuron", enabled=False)` (bfloat16 needs no loss scaling).'
                if library is None
                else 'Pass device="neuron" (with enabled=False under bfloat16 where it takes one).',
            )
            return
        device, imports = built
        old_device = arg_by_name(args, "device")
        if isinstance(device, cst.SimpleString) and old_device is not None and isinstance(old_device.value, cst.SimpleString):
            quote = old_device.value.value[-1]
            device = cst.SimpleString(f"{quote}neuron{quote}")
        rest = [a for a in args if a is not old_device]
        head = [keyword_arg("device", device) if device_keyword else cst.Arg(device)]
        if library is not None and not library.switchable:
            # No `enabled=` to turn off: only the device moves (the message says why it stays live).
            message += f"; {library.note}"
            if self.context.settings.amp_dtype == "float16":
                message += f"; {FP16_WARNING}"
        elif self.context.settings.amp_dtype == "bfloat16" and mentions_float16(self):
            # The file may still run float16 regions (an explicit dtype the port keeps, or a
            # runtime choice such as `enabled=(dtype == "float16")`): keep the scaler as written.
            message += f"; {FP16_KEPT_NOTE}"
        elif self.context.settings.amp_dtype == "bfloat16":
            enabled = arg_by_name(rest, "enabled")
            already_off = enabled is not None and isinstance(enabled.value, cst.Name) and enabled.value.value == "False"
            message += f"; {BF16_NOTE}"
            if not already_off:
                rest = [a for a in rest if a is not enabled]
                rest.append(keyword_arg("enabled", cst.Name("False")))
                if enabled is not None:
                    # Say what was dropped: `enabled=(dtype == "float16")` decided at run time.
                    message += f" (replaces `enabled={self.context.code(enabled.value)}`)"
        else:
            message += f"; {FP16_WARNING}"
        new_func, more = spelled
        self.report(
            node,
            message,
            replacement=node.with_changes(func=new_func, args=[*head, *rest]),
            safety=Safety.SAFE,
            imports=imports + more,
            unused_imports=import_to_drop(self, node.func) if library is None else (),
            description="use `torch.amp.GradScaler` on the target device" if library is None else "pass the target device",
        )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        """``from torch.cuda.amp import GradScaler`` in one branch, another device's scaler (or
        ``torch.amp``'s) in the others: the name resolves to the first import, so the uses are
        not this class's to the other checks, yet the CUDA branch is the one a neuron run takes."""
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        if dotted_name(node.module) not in ("torch.cuda.amp", "torch.cuda.amp.grad_scaler"):
            return
        for alias in node.names:
            if dotted_name(alias.name) != "GradScaler":
                continue
            local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else "GradScaler"
            other = self.context.scope.lookup(local)
            if other is None or other in LEGACY_SCALER:
                continue
            self.report(
                alias,
                f"`{local}` is the CUDA GradScaler in this branch and `{other}` in another: "
                "the CUDA branch is the one a neuron run takes",
                guidance=(
                    'Add a branch for the target that binds `torch.amp.GradScaler` and construct it with "neuron" '
                    "(enabled=False under bfloat16); where the other branch is a torch-version fallback, "
                    "the target's torch takes that one and this import can go."
                ),
                effort=Effort.LOW,
            )

    # Non-call references: annotations and isinstance checks move; others are reported.
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "GradScaler":
            self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "GradScaler" and is_reference(self, node):
            self._reference(node)

    def _reference(self, node: cst.Attribute | cst.Name) -> None:
        parent = self.context.parent
        if isinstance(parent, cst.Call) and parent.func is node:
            return
        if self.qualname(node) not in LEGACY_SCALER:
            return
        message = "`torch.cuda.amp.GradScaler` is CUDA-only (and deprecated)"
        spelled = self.spell("torch.amp.GradScaler")
        if spelled is not None and self._type_position():
            expr, imports = spelled
            self.report(
                node,
                message,
                replacement=expr,
                safety=Safety.SAFE,
                imports=imports,
                unused_imports=import_to_drop(self, node),
                description="refer to `torch.amp.GradScaler` (the CUDA class is its subclass)",
            )
            return
        self.report(
            node,
            message,
            guidance='Use `torch.amp.GradScaler` and pass "neuron" as its first argument where it is '
            "called (its device defaults to \"cuda\"), with enabled=False under bfloat16.",
            effort=Effort.LOW,
        )

    def _type_position(self) -> bool:
        """Inside an annotation, or the class argument of isinstance/issubclass."""
        ancestors = self.context.ancestors
        if any(isinstance(a, cst.Annotation) for a in ancestors):
            return True
        if len(ancestors) >= 2 and isinstance(ancestors[-1], cst.Arg) and isinstance(ancestors[-2], cst.Call):
            call = ancestors[-2]
            return isinstance(call.func, cst.Name) and call.func.value in ("isinstance", "issubclass") and (
                len(call.args) == 2 and call.args[1] is ancestors[-1]
            )
        return False
