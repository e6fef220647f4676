"""CN306: ``custom_fwd`` / ``custom_bwd`` for CUDA -> ``torch.amp.custom_fwd(device_type=<device>)``."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety, Valid

from .._shared.args import arg_by_name, keyword_arg
from .._shared.names import import_to_drop, is_reference
from .._shared.strings import string_value
from .._shared.target import device_type_expr

__all__ = ["CustomFwdBwd"]

_LEGACY = {
    f"torch.cuda.amp.{mod}{fn}": f"torch.amp.{fn}"
    for fn in ("custom_fwd", "custom_bwd")
    for mod in ("", "autocast_mode.")
}
_CURRENT = frozenset({f"torch.amp.{mod}{fn}" for fn in ("custom_fwd", "custom_bwd") for mod in ("", "autocast_mode.")})
_MEMBERS = frozenset({"custom_fwd", "custom_bwd"})
_PARTIAL = "functools.partial"


def _member(func: cst.BaseExpression) -> str | None:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


class CustomFwdBwd(Rule):
    """
    ## What it does
    Rewrites CUDA ``custom_fwd``/``custom_bwd`` to ``torch.amp.custom_fwd(device_type=<device>)``.
    ``@torch.cuda.amp.custom_fwd`` / ``@custom_fwd(cast_inputs=torch.float32)`` /
    ``@torch.amp.custom_bwd(device_type="cuda")`` /
    ``functools.partial(torch.amp.custom_bwd, device_type="cuda")`` become
    ``torch.amp.custom_fwd(device_type="neuron", ...)`` (``cast_inputs=`` kept).

    ## Why is this bad?
    ``torch.cuda.amp.custom_fwd`` ties the function's autocast state to CUDA (and is
    deprecated); on Trainium the forward would not run with the autocast settings of the
    surrounding neuron region, and ``cast_inputs`` would cast for the wrong device.

    ## Example
    ```python
    class F(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x): ...
    ```
    becomes
    ```python
    class F(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)
        def forward(ctx, x): ...
    ```

    ## Fix safety
    Safe: ``torch.amp.custom_fwd(device_type=...)`` is what the CUDA decorator does, for the
    target device. Calls with ``**kwargs`` and other references to the CUDA decorators
    (aliases) are reported with the spelling to use. An import of the CUDA decorators that is
    not at module level (an old-torch ``else:`` branch, a ``try``, a function body) is reported
    at the import too: the engine's import cleanup only drops module-level imports, and such a
    branch still picks the CUDA decorators on an old torch.
    """

    code = "CN306"
    name = "cuda-custom-fwd-bwd"
    fixes = frozenset({Safety.SAFE})
    triggers = ("custom_fwd", "custom_bwd")
    emits = ("torch.amp.custom_fwd", "torch.amp.custom_bwd", "torch.accelerator.current_accelerator")
    VALID = (
        'import torch\n@torch.amp.custom_fwd(device_type="neuron")\ndef f(ctx, x):\n    return x\n',
        'import torch\n@torch.amp.custom_bwd(device_type="cpu")\ndef b(ctx, g):\n    return g\n',
        # A project's own decorator with the same name: not torch's, so it stays.
        "from mylib import custom_fwd\n@custom_fwd\ndef f(ctx, x):\n    return x\n",
        Valid(
            "import torch\n@torch.amp.custom_fwd(device_type=torch.accelerator.current_accelerator().type)\n"
            "def f(ctx, x):\n    return x\n",
            target="accelerator",
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n@torch.cuda.amp.custom_fwd\ndef f(ctx, x):\n    return x\n",
            'import torch\n@torch.amp.custom_fwd(device_type="neuron")\ndef f(ctx, x):\n    return x\n',
        ),
        Invalid(
            "from torch.cuda.amp import custom_fwd\n@custom_fwd(cast_inputs=torch.float32)\ndef f(ctx, x):\n    return x\n",
            'import torch\n\n@torch.amp.custom_fwd(device_type="neuron", cast_inputs=torch.float32)\ndef f(ctx, x):\n    return x\n',
        ),
        Invalid(
            "import torch\nfrom torch.cuda import amp\n@amp.custom_bwd\ndef b(ctx, g):\n    return g\n",
            'import torch\n@torch.amp.custom_bwd(device_type="neuron")\ndef b(ctx, g):\n    return g\n',
        ),
        Invalid(
            'import torch\n@torch.amp.custom_bwd(device_type="cuda")\ndef b(ctx, g):\n    return g\n',
            'import torch\n@torch.amp.custom_bwd(device_type="neuron")\ndef b(ctx, g):\n    return g\n',
        ),
        # The decorator reached through functools.partial(torch.amp.custom_bwd, device_type="cuda").
        Invalid(
            'import functools, torch\nbwd = functools.partial(torch.amp.custom_bwd, device_type="cuda")\n',
            'import functools, torch\nbwd = functools.partial(torch.amp.custom_bwd, device_type="neuron")\n',
        ),
        Invalid(
            "import torch\nfrom functools import partial\nfwd = partial(torch.cuda.amp.custom_fwd, cast_inputs=torch.float32)\n",
            'import torch\nfrom functools import partial\nfwd = partial(torch.amp.custom_fwd, device_type="neuron", cast_inputs=torch.float32)\n',
        ),
        Invalid(
            "import torch\nf2 = torch.cuda.amp.custom_fwd(f)\n",
            'import torch\nf2 = torch.amp.custom_fwd(f, device_type="neuron")\n',
        ),
        Invalid(
            "import torch\n@torch.cuda.amp.custom_fwd\ndef f(ctx, x):\n    return x\n",
            "import torch\n@torch.amp.custom_fwd(device_type="
            "(torch.accelerator.current_accelerator() or torch.get_default_device()).type)\n"
            "def f(ctx, x):\n    return x\n",
            target="accelerator",
        ),
        Invalid("import torch\nfwd = torch.cuda.amp.custom_fwd\n"),
        # The old-torch branch of a compatibility shim: the import itself is what picks CUDA.
        Invalid(
            "import torch\nif hasattr(torch.amp, 'custom_fwd'):\n    from torch.amp import custom_fwd\n"
            "else:\n    from torch.cuda.amp import custom_fwd\n"
        ),
        Invalid("def load():\n    from torch.cuda.amp import custom_bwd as bwd\n    return bwd\n"),
    )

    # -- calls: the decorator with arguments, the function form, functools.partial ------------
    def visit_Call(self, node: cst.Call) -> None:
        member = _member(node.func)
        if member in _MEMBERS or isinstance(node.func, cst.Name):
            qualified = self.qualname(node.func)
            if qualified in _LEGACY:
                self._legacy_call(node, qualified)
                return
            if qualified in _CURRENT:
                self._cuda_keyword(node)
                return
        if member == "partial" and node.args and self.qualname(node.func) == _PARTIAL:
            self._partial(node)

    def _legacy_call(self, node: cst.Call, qualified: str) -> None:
        if any(a.star for a in node.args):
            self._report_only(node, qualified)
            return
        built = self._new_decorator(qualified)
        if built is None:
            self._report_only(node, qualified)
            return
        func, device, imports = built
        args = list(node.args)
        split = sum(1 for a in args if a.keyword is None)
        args.insert(split, keyword_arg("device_type", device))
        self.report(
            node,
            f"`{qualified}` is CUDA-only (and deprecated)",
            replacement=node.with_changes(func=func, args=args),
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, node.func),
            description=f"use `{_LEGACY[qualified]}(device_type=...)`",
        )

    def _cuda_keyword(self, call: cst.Call) -> None:
        """``device_type="cuda"`` in a torch.amp.custom_fwd/bwd call or a functools.partial of one."""
        arg = arg_by_name(list(call.args), "device_type")
        if arg is None or string_value(arg.value) != "cuda":
            return
        built = device_type_expr(self)
        if built is None:
            return
        device, imports = built
        if isinstance(device, cst.SimpleString) and isinstance(arg.value, cst.SimpleString):
            quote = arg.value.value[-1]
            device = cst.SimpleString(f"{quote}neuron{quote}")
        args = [a.with_changes(value=device) if a is arg else a for a in call.args]
        self.report(
            call,
            "custom_fwd/custom_bwd for the CUDA device",
            replacement=call.with_changes(args=args),
            safety=Safety.SAFE,
            imports=imports,
            description="use the target device type",
        )

    def _partial(self, node: cst.Call) -> None:
        first = node.args[0]
        if first.keyword is not None or first.star:
            return
        qualified = self.qualname(first.value)
        if qualified in _CURRENT:
            self._cuda_keyword(node)
            return
        if qualified not in _LEGACY:
            return
        built = self._new_decorator(qualified)
        if built is None or any(a.star for a in node.args):
            self._report_only(node, qualified)
            return
        func, device, imports = built
        rest = [a for a in node.args[1:] if not (a.keyword and a.keyword.value == "device_type")]
        args = [cst.Arg(func), keyword_arg("device_type", device), *rest]
        self.report(
            node,
            f"`{qualified}` is CUDA-only (and deprecated)",
            replacement=node.with_changes(args=args),
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, first.value),
            description=f"use `{_LEGACY[qualified]}` with device_type",
        )

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar) or node.relative or node.module is None:
            return
        module = self.context.code(node.module)
        legacy = [a for a in node.names if f"{module}.{self.context.code(a.name)}" in _LEGACY]
        if not legacy:
            return
        # A module-level import goes with the decorators the fixes rewrite; one in a branch, a
        # try or a function is the code that chooses the CUDA decorators, and stays.
        if not any(isinstance(a, (cst.If, cst.Else, cst.Try, cst.FunctionDef, cst.With)) for a in self.context.ancestors):
            return
        qualified = f"{module}.{self.context.code(legacy[0].name)}"
        self.report(
            node,
            f"`from {module} import ...` picks the CUDA-only (deprecated) `{qualified}`",
            guidance=f'Import `{_LEGACY[qualified]}` instead and pass `device_type="neuron"` where it is applied '
            "(it exists since torch 2.4: a branch for older torch can go).",
            effort=Effort.LOW,
        )

    # -- bare decorators and other references --------------------------------------------------
    def visit_Decorator(self, node: cst.Decorator) -> None:
        expr = node.decorator
        if _member(expr) not in _MEMBERS or isinstance(expr, cst.Call):
            return
        qualified = self.qualname(expr)
        if qualified not in _LEGACY:
            return
        built = self._new_decorator(qualified)
        if built is None:
            self._report_only(node, qualified)
            return
        func, device, imports = built
        # Report the visited Decorator itself: the engine rebuilds the path to the reported
        # node from the ancestors of the node being visited.
        self.report(
            node,
            f"`{qualified}` is CUDA-only (and deprecated)",
            replacement=node.with_changes(decorator=cst.Call(func=func, args=[keyword_arg("device_type", device)])),
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, expr),
            description=f"use `@{_LEGACY[qualified]}(device_type=...)`",
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in _MEMBERS:
            self._reference(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in _MEMBERS and is_reference(self, node):
            self._reference(node)

    def _reference(self, node: cst.Attribute | cst.Name) -> None:
        parent = self.context.parent
        if isinstance(parent, cst.Decorator) or (isinstance(parent, cst.Call) and parent.func is node):
            return
        if isinstance(parent, cst.Arg) and len(self.context.ancestors) >= 2:
            call = self.context.ancestors[-2]
            if isinstance(call, cst.Call) and call.args and call.args[0] is parent and _member(call.func) == "partial":
                return  # handled with the partial call
        qualified = self.qualname(node)
        if qualified in _LEGACY:
            self._report_only(node, qualified)

    def _report_only(self, node: cst.CSTNode, qualified: str) -> None:
        self.report(
            node,
            f"`{qualified}` is CUDA-only (and deprecated)",
            guidance=f'Use `{_LEGACY[qualified]}(device_type="neuron")` (keep `cast_inputs=`).',
            effort=Effort.LOW,
        )

    def _new_decorator(
        self, qualified: str
    ) -> tuple[cst.BaseExpression, cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
        spelled = self.spell(_LEGACY[qualified])
        device = device_type_expr(self)
        if spelled is None or device is None:
            return None
        return spelled[0], device[0], spelled[1] + device[1]
