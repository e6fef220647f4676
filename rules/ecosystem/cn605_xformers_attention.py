"""CN605: xformers attention."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Safety

from .._shared.args import arg_by_name
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_any, in_package
from ._helpers import sdpa_bshd

__all__ = ["XformersAttention"]

_GUIDANCE = (
    "Use torch.nn.functional.scaled_dot_product_attention "
    "(an NKI kernel on Neuron): it takes (batch, heads, seq, head_dim), xformers takes "
    "(batch, seq, heads, head_dim): transpose(1, 2) in and out; LowerTriangularMask() becomes "
    "is_causal=True, a tensor bias becomes attn_mask=."
)
_MEA = frozenset({"xformers.ops.memory_efficient_attention", "xformers.ops.fmha.memory_efficient_attention"})
_CAUSAL = frozenset({"xformers.ops.LowerTriangularMask", "xformers.ops.fmha.attn_bias.LowerTriangularMask"})


class XformersAttention(PackageRule):
    """
    ## What it does
    Reports xformers imports and calls; rewrites ``xops.memory_efficient_attention(q, k, v,
    attn_bias=None|LowerTriangularMask(), p=..., scale=...)`` to
    ``torch.nn.functional.scaled_dot_product_attention`` with explicit transposes.

    ## Why is this bad?
    xformers builds CUDA kernels only. PyTorch's SDPA is the portable attention and routes to an
    NKI kernel on the neuron device.

    ## Example
    ```python
    y = xops.memory_efficient_attention(q, k, v, p=0.1)
    ```
    becomes
    ```python
    y = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p=0.1
    ).transpose(1, 2)
    ```

    ## Fix safety
    Unsafe: xformers also accepts 3-d (batch, seq, dim) inputs, for which the transposes are
    wrong, and the kernels round differently. Calls with other biases or ``op=`` are only
    reported.
    """

    code = "CN605"
    name = "xformers-attention"
    fixes = frozenset({Safety.UNSAFE})
    packages = ("xformers",)
    import_message = "xformers is CUDA-only and not available on Trainium"
    import_guidance = _GUIDANCE + " Remove the import once its calls are ported."
    triggers = ("xformers",)
    emits = ("torch.nn.functional.scaled_dot_product_attention",)
    VALID = (
        "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n",
        'backend = "xformers"\n',
    )
    INVALID = (
        Invalid("import xformers.ops as xops\n"),
        Invalid(
            "import xformers.ops as xops\nimport torch.nn.functional as F\n"
            "y = xops.memory_efficient_attention(q, k, v, p=p)\n",
            # The aliased module import, now unused, is removed with the call.
            "import torch.nn.functional as F\n"
            "y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), "
            "v.transpose(1, 2), dropout_p=p).transpose(1, 2)\n",
            unsafe=True,
        ),
        Invalid(
            "import xformers.ops as xops\nimport torch.nn.functional as F\n"
            "y = xops.memory_efficient_attention(q, k, v, attn_bias=xops.LowerTriangularMask())\n",
            "import torch.nn.functional as F\n"
            "y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), "
            "v.transpose(1, 2), is_causal=True).transpose(1, 2)\n",
            unsafe=True,
        ),
        Invalid("import xformers.ops as xops\ny = xops.memory_efficient_attention(q, k, v, attn_bias=bias)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # Every report resolves a name through an import of xformers.
        return imports_any(code, cls.packages)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if not in_package(qualified, self.packages) or qualified in _CAUSAL:
            return
        assert qualified is not None
        message = f"`{qualified.rsplit('.', 1)[-1]}` is an xformers CUDA kernel"
        built = self._sdpa(node) if qualified in _MEA else None
        if built is None:
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.MEDIUM)
            return
        replacement, imports = built
        # `import xformers.ops as xops` binds xops -> xformers.ops; removed only if unused.
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            imports=imports,
            unused_imports=(("xformers.ops", None), ("xformers", "ops")),
            description="use scaled_dot_product_attention",
        )

    def _sdpa(self, node: cst.Call):
        if any(a.star for a in node.args) or len(node.args) > 6:
            return None
        allowed = {"query", "key", "value", "attn_bias", "p", "scale"}
        if any(a.keyword is not None and a.keyword.value not in allowed for a in node.args):
            return None
        q, k, v = (arg_by_name(node, n, i) for i, n in enumerate(("query", "key", "value")))
        if q is None or k is None or v is None:
            return None
        extra: list[tuple[str, cst.BaseExpression]] = []
        bias = arg_by_name(node, "attn_bias", 3)
        if bias is not None:
            b = bias.value
            if isinstance(b, cst.Call) and not b.args and self.qualname(b.func) in _CAUSAL:
                extra.append(("is_causal", cst.Name("True")))
            elif not (isinstance(b, cst.Name) and b.value == "None"):
                return None
        p = arg_by_name(node, "p", 4)
        if p is not None:
            extra.append(("dropout_p", p.value))
        scale = arg_by_name(node, "scale", 5)
        if scale is not None:
            extra.append(("scale", scale.value))
        return sdpa_bshd(self, q.value, k.value, v.value, extra)
