"""CN621: custom operators whose only kernel is registered for CUDA (``device_types="cuda"``)."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Valid

from .._shared.args import arg_by_name, positional_args
from .._shared.kernels import kernel_index
from .._shared.strings import string_value

__all__ = ["CudaOpRegistration"]

# Registrations that take a device type, and where: (position, keyword). `custom_op(name, fn, *,
# mutates_args, device_types)`, `register_kernel(op, device_types, func)`.
_DEVICE_TYPES = {
    "torch.library.custom_op": (None, "device_types"),
    "torch.library.register_kernel": (1, "device_types"),
}
# `torch.library.impl("ns::op", "cuda")` (types) or `torch.library.impl(lib, "op", "CUDA")` (a
# dispatch key).
_IMPL = "torch.library.impl"
_KEYS = frozenset({"cuda", "autogradcuda"})


def _names_cuda(node: cst.BaseExpression | None) -> str | None:
    """The CUDA device type or dispatch key ``node`` names (``"cuda"``, ``("cuda",)``,
    ``"CUDA"``), unless the same value also names another place for the kernel to run."""
    if node is None:
        return None
    values = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List, cst.Set)) else [node]
    words = [string_value(v) for v in values]
    if any(w is None for w in words):
        return None  # a value only known at run time
    cuda = [w for w in words if w.lower() in _KEYS]  # type: ignore[union-attr]
    return cuda[0] if cuda and len(cuda) == len(words) else None


class CudaOpRegistration(Rule):
    """
    ## What it does
    Reports custom operators whose kernel is registered for CUDA only (``device_types="cuda"``,
    the ``"CUDA"`` dispatch key).

    The registrations are ``torch.library.custom_op(..., device_types="cuda")``,
    ``torch.library.register_kernel(op, "cuda")`` and ``@op.register_kernel("cuda")``,
    ``torch.library.impl(lib, "op", "CUDA")`` / ``torch.library.impl("ns::op", "cuda")``, and
    ``lib.impl("op", fn, "CUDA")`` on a ``torch.library.Library``. When the registered function
    (the decorated one) calls a CUDA-only kernel, the finding names it.

    ## Why is this bad?
    The dispatcher runs an operator's kernel for the device of its inputs. An operator with a
    CUDA kernel only has none for the neuron device: called with neuron tensors it raises
    ``NotImplementedError: Could not run ... with arguments from the 'PrivateUse1' backend``,
    while every other line of the port reads as device-neutral.

    ## Example
    ```python
    @torch.library.custom_op("mylib::swiglu", mutates_args=(), device_types="cuda")
    def swiglu(x: torch.Tensor) -> torch.Tensor:
        return _swiglu_kernel(x)
    ```

    ## Fix safety
    No fix. Rewriting the device type would hand neuron tensors to the implementation, which
    here usually launches a Triton or CUDA kernel; only the user knows whether it is plain torch
    (then register it for the neuron device too) or needs an NKI kernel first.
    """

    code = "CN621"
    name = "cuda-op-registration"
    triggers = ("cuda", "CUDA")
    VALID = (
        'import torch\n@torch.library.custom_op("m::f", mutates_args=())\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x\n',
        'import torch\n@torch.library.custom_op("m::f", mutates_args=(), device_types="cpu")\ndef f(x):\n    return x\n',
        # A kernel for CUDA and one for the host: the CPU path works; CUDA's is the GPU's own.
        'import torch\n@torch.library.custom_op("m::f", mutates_args=(), device_types=("cpu", "cuda"))\ndef f(x):\n    return x\n',
        'import torch\ntorch.library.impl(lib, "op", "CompositeImplicitAutograd")(f)\n',
        'import torch\n@torch.library.custom_op("m::f", mutates_args=(), device_types=kind)\ndef f(x):\n    return x\n',
        # Another library's `impl` with a CUDA word is no registration of a torch op.
        'import mylib\nmylib.impl("cuda")\nbackend.impl(x, "cuda")\n',
        Valid('import torch\n@torch.library.custom_op("m::f", mutates_args=(), device_types="neuron")\ndef f(x):\n    return x\n', target="accelerator"),
    )
    INVALID = (
        Invalid('import torch\n@torch.library.custom_op("m::f", mutates_args=(), device_types="cuda")\ndef f(x):\n    return x + 1\n'),
        Invalid(
            "import torch\nimport triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
            '@torch.library.custom_op("m::f", mutates_args=(), device_types=("cuda",))\n'
            "def f(x):\n    _k[(1,)](x)\n    return x\n"
        ),
        Invalid('import torch\nfrom torch.library import impl\n\n@impl(_lib, "dispatch", "CUDA")\ndef d(x):\n    return x\n'),
        Invalid('import torch\n_lib = torch.library.Library("aten", "IMPL")\n_lib.impl("bmm", bmm_fast, "CUDA")\n'),
        Invalid('import torch\ntorch.library.register_kernel("m::f", "cuda", f_cuda)\n\n@f.register_kernel("cuda")\ndef _(x):\n    return x\n'),
        Invalid('import torch\ntorch.library.impl("m::f", "cuda", func=f_cuda)\n', target="accelerator"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return b"custom_op" in code or b"register_kernel" in code or b"impl(" in code

    def visit_Call(self, node: cst.Call) -> None:
        qualified = self.qualname(node.func)
        value: cst.BaseExpression | None = None
        if qualified in _DEVICE_TYPES:
            position, keyword = _DEVICE_TYPES[qualified]
            arg = arg_by_name(node, keyword, position)
            value = arg.value if arg is not None else None
        elif qualified == _IMPL:
            # `impl("ns::op", "cuda")`: the device types second; `impl(lib, "op", "CUDA")`: a
            # dispatch key third.
            first = positional_args(node)[:1]
            qualname_form = bool(first) and string_value(first[0].value) is not None
            arg = arg_by_name(node, "types", 1) if qualname_form else arg_by_name(node, "dispatch_key", 2)
            value = arg.value if arg is not None else None
        elif qualified is None and self._library_method(node.func, "impl"):
            arg = arg_by_name(node, "dispatch_key", 2)  # Library.impl(op_name, fn, dispatch_key)
            value = arg.value if arg is not None else None
        elif qualified is None and self._library_method(node.func, "register_kernel"):
            arg = arg_by_name(node, "device_types", 0)
            value = arg.value if arg is not None else None
        word = _names_cuda(value)
        if word is None:
            return
        kernel = self._registered_kernel(node)
        what = f"; its implementation runs {kernel}" if kernel else ""
        # At the device value: that is the line to change, inside a decorator spread over lines.
        self.report(
            value,  # type: ignore[arg-type]
            f"`{self.context.code(value)}`: this operator has a kernel for CUDA only, none for the neuron device{what}",
            guidance=(
                "port the implementation (an NKI kernel, or the plain PyTorch code it replaces) and register it for "
                "the neuron device as well; rewriting the device type alone hands neuron tensors to CUDA code"
                if kernel
                else "if the implementation is plain PyTorch, register it for the neuron device too "
                '(device_types=("cuda", "neuron")); otherwise port its kernel first'
            ),
            effort=Effort.HIGH if kernel else Effort.LOW,
        )

    def _library_method(self, func: cst.BaseExpression, method: str) -> bool:
        """``lib.impl(...)`` / ``op.register_kernel(...)`` on an object the resolver cannot name:
        a ``torch.library.Library`` or a custom op. Matched by the method and a literal key."""
        return isinstance(func, cst.Attribute) and func.attr.value == method

    def _registered_kernel(self, node: cst.Call) -> str | None:
        """The CUDA-only kernel the decorated function calls, when ``node`` is its decorator."""
        parent = self.context.parent
        func = self.context.ancestors[-2] if isinstance(parent, cst.Decorator) and len(self.context.ancestors) >= 2 else None
        if not isinstance(func, cst.FunctionDef):
            return None
        return kernel_index(self).first_call([func.body])
