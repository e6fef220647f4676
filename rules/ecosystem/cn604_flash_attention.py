"""CN604: flash-attn kernels."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Safety, Settings
from cuda2neuron.python import dotted_name

from .._shared.args import arg_by_name
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_package, in_package
from ._helpers import sdpa_bshd

__all__ = ["FlashAttention"]

_GUIDANCE = (
    "Use torch.nn.functional.scaled_dot_product_attention (on Neuron it "
    "routes to an NKI attention kernel); it takes (batch, heads, seq, head_dim) while flash-attn "
    "takes (batch, seq, heads, head_dim): transpose(1, 2) in and out. Pass enable_gqa=True when "
    "k/v have fewer heads than q."
)
# Varlen/packed calls are not pointed at torch.nn.attention.varlen.varlen_attn, although Neuron
# 2.34's release notes say it works there (torch-neuronx 2.13.3.1 / 2.14.3.1): torch 2.13 and 2.14
# have the name, but on the CPU it needs aten::_flash_attention_forward, which has no CPU kernel,
# so a port using it could not run under validate's emulator (checked on 2.13.0 and 2.14.1).
_FUNC = frozenset({"flash_attn.flash_attn_func", "flash_attn.flash_attn_interface.flash_attn_func"})
# flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, ...) -> SDPA keyword.
_MAPPED = (("dropout_p", 3, "dropout_p"), ("softmax_scale", 4, "scale"), ("causal", 5, "is_causal"))
_KNOWN = frozenset({"q", "k", "v", "dropout_p", "softmax_scale", "causal"})
# Modules of flash_attn that are plain PyTorch: the padding helpers (pad_input, unpad_input,
# index_first_axis, ...: gather/scatter autograd Functions, flash_attn/bert_padding.py) and the
# collective wrappers (all_gather, reduce_scatter, all_reduce: torch.distributed calls,
# flash_attn/utils/distributed.py). Only importing them pulls in the CUDA package. The import is
# the one thing to change, so their calls are not reported one by one: "a flash-attn CUDA
# kernel" with SDPA as the fix would be wrong for each of them.
_PURE_TORCH = {
    "flash_attn.bert_padding": (
        "flash_attn's padding helpers",
        "they are torch gather/scatter functions",
    ),
    "flash_attn.utils.distributed": (
        "flash_attn's collective wrappers",
        "they wrap torch.distributed's all_gather_into_tensor / reduce_scatter_tensor / all_reduce",
    ),
}


def _pure_torch_guidance(module: str, what: str) -> str:
    return (
        f"{module}'s helpers are plain PyTorch, but importing them imports the flash_attn "
        f"package (its CUDA build): keep a copy of the helpers the project uses in its own code ({what}) "
        "and import that instead"
    )


class FlashAttention(PackageRule):
    """
    ## What it does
    Reports flash-attn imports and calls; rewrites ``flash_attn_func(q, k, v, dropout_p=...,
    softmax_scale=..., causal=...)`` to ``torch.nn.functional.scaled_dot_product_attention``
    with the layout change made explicit.

    ## Why is this bad?
    flash-attn ships CUDA kernels only. PyTorch's SDPA computes the same attention and, on the
    neuron device, dispatches to an NKI kernel.

    ## Example
    ```python
    y = flash_attn_func(q, k, v, dropout_p=p, causal=True)
    ```
    becomes
    ```python
    y = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p=p, is_causal=True
    ).transpose(1, 2)
    ```

    ## Fix safety
    Unsafe: flash-attn takes (batch, seq, heads, dim) and SDPA (batch, heads, seq, dim), which
    the fix bridges with transposes; but grouped-query attention (fewer k/v heads) needs
    ``enable_gqa=True``, a causal mask with different query and key lengths is aligned
    differently (flash-attn: bottom-right, SDPA: top-left), and the kernels round differently.
    Calls with other arguments (``window_size``, ``alibi_slopes``, varlen/packed variants,
    ``return_attn_probs``) are only reported.
    """

    code = "CN604"
    name = "flash-attention"
    fixes = frozenset({Safety.UNSAFE})
    packages = ("flash_attn",)
    import_message = "flash-attn is CUDA-only and not available on Trainium"
    import_guidance = _GUIDANCE + " Remove the import once its calls are ported."
    triggers = ("flash_attn",)
    emits = ("torch.nn.functional.scaled_dot_product_attention",)
    VALID = (
        "import torch.nn.functional as F\ny = F.scaled_dot_product_attention(q, k, v)\n",
        'backend = "flash_attn"\n',  # a selector string
        "def flash_attn_func(q, k, v):\n    return q\ny = flash_attn_func(q, k, v)\n",  # own helper
    )
    # (the plain-PyTorch helpers' imports are INVALID below; their calls alone are plain PyTorch)
    INVALID = (
        Invalid("from flash_attn import flash_attn_func\n"),
        Invalid(
            "from flash_attn import flash_attn_func\nimport torch.nn.functional as F\n"
            "y = flash_attn_func(q, k, v, dropout_p=p, causal=True)\n",
            "import torch.nn.functional as F\n"
            "y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), "
            "v.transpose(1, 2), dropout_p=p, is_causal=True).transpose(1, 2)\n",
            unsafe=True,
        ),
        Invalid(
            "import flash_attn\ny = flash_attn.flash_attn_func(a + b, k, v, 0.1, None, False)\n",
            "import torch\n\n"
            "y = torch.nn.functional.scaled_dot_product_attention((a + b).transpose(1, 2), "
            "k.transpose(1, 2), v.transpose(1, 2), dropout_p=0.1, scale=None, is_causal=False)"
            ".transpose(1, 2)\n",
            unsafe=True,
        ),
        Invalid(
            "from flash_attn import flash_attn_func\ny = flash_attn_func(q, k, v, window_size=(8, 8))\n"
        ),
        Invalid(
            "from flash_attn import flash_attn_varlen_func\ny = flash_attn_varlen_func(q, k, v, cu, cu, m, m)\n"
        ),
        Invalid("from flash_attn.bert_padding import pad_input, unpad_input\nh, idx, cu, m, _ = unpad_input(x, mask)\n"),
        Invalid("from flash_attn.utils.distributed import all_gather\ny = all_gather(x, group)\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: every report is an import of the package or a call resolved through one, so
        a file without such an import gets no finding; unsure elsewhere (libcst runs)."""
        return None if imports_package(file.tree, cls.packages) else []

    def report_import(self, node: cst.Import | cst.ImportFrom) -> None:
        module = dotted_name(node.module) if isinstance(node, cst.ImportFrom) and node.module is not None else None
        if module in _PURE_TORCH:
            helpers, what = _PURE_TORCH[module]
            self.report(
                node, f"importing {helpers} imports the CUDA-only flash_attn package",
                guidance=_pure_torch_guidance(module, what), effort=Effort.LOW,
            )
            return
        super().report_import(node)

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if not in_package(qualified, self.packages) or in_package(qualified, tuple(_PURE_TORCH)):
            return
        assert qualified is not None
        message = f"`{qualified.rsplit('.', 1)[-1]}` is a flash-attn CUDA kernel"
        built = self._sdpa(node) if qualified in _FUNC else None
        if built is None:
            self.report(node, message, guidance=_GUIDANCE, effort=Effort.MEDIUM)
            return
        replacement, imports = built
        module, _, name = qualified.rpartition(".")
        self.report(
            node,
            message,
            replacement=replacement,
            safety=Safety.UNSAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            imports=imports,
            unused_imports=((module, name), (module, None)),
            description="use scaled_dot_product_attention",
        )

    def _sdpa(self, node: cst.Call):
        if any(a.star for a in node.args) or len(node.args) > 6:
            return None
        if any(a.keyword is not None and a.keyword.value not in _KNOWN for a in node.args):
            return None
        q, k, v = (arg_by_name(node, n, i) for i, n in enumerate(("q", "k", "v")))
        if q is None or k is None or v is None:
            return None
        extra = []
        for name, pos, sdpa_name in _MAPPED:
            arg = arg_by_name(node, name, pos)
            if arg is not None:
                extra.append((sdpa_name, arg.value))
        return sdpa_bshd(self, q.value, k.value, v.value, extra)
