"""CN605: xformers attention."""

from __future__ import annotations

import libcst as cst

import ast

from cuda2neuron.core import Effort, Finding, Invalid, Safety, Settings

from .._shared.args import arg_by_name
from .._shared.detector import AstDetector
from .._shared.names import call_qualname
from .._shared.packages import PackageRule, imports_any, imports_package, in_package
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

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """Without an absolute import of xformers nothing resolves into it: no finding, no walk.
        Elsewhere the imports and calls the visitor reports, read by ``_Detector``; unsure where
        the visitor may build its (unsafe) SDPA fix."""
        if not imports_package(file.tree, cls.packages):
            return []
        return _Detector(cls, file).made_findings()

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


_ALLOWED = frozenset({"query", "key", "value", "attn_bias", "p", "scale"})


class _Detector(AstDetector):
    """``PackageRule``'s import reports and ``visit_Call`` above on CPython's ``ast``: each import
    of xformers, and each call resolved into it but the causal mask, reported without a fix.
    Unsure where ``_sdpa`` could build the SDPA rewrite (a ``memory_efficient_attention`` whose
    arguments it reads: no ``*``, no ``op=``, a bias that is absent, ``None`` or a call)."""

    def _finding(self, node: ast.AST, message: str, guidance: str, effort: Effort, ancestors: tuple[object, ...]) -> Finding:
        return self.finding(node, message, guidance, effort)

    def visit_Import(self, node: ast.Import) -> None:
        if any(in_package(alias.name, self.rule.packages) for alias in node.names):
            self._import(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level and node.module is not None and in_package(node.module, self.rule.packages):
            self._import(node)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        rule = self.rule
        self._reports.append((node, rule.import_message, rule.import_guidance, Effort.LOW, tuple(self.ctx.ancestors)))

    def visit_Call(self, node: ast.Call) -> None:
        from cuda2neuron.python import Unsure

        qualified = self.ctx.call_qualname(node)
        if not in_package(qualified, self.rule.packages) or qualified in _CAUSAL:
            return
        assert qualified is not None
        if qualified in _MEA and self._may_rewrite(node):
            raise Unsure("the SDPA rewrite: libcst builds it")
        message = f"`{qualified.rsplit('.', 1)[-1]}` is an xformers CUDA kernel"
        self._reports.append((node, message, _GUIDANCE, Effort.MEDIUM, tuple(self.ctx.ancestors)))

    def _may_rewrite(self, node: ast.Call) -> bool:
        """Could ``_sdpa`` build a replacement (over-counted: a bias call is not resolved)?"""
        args = self.ctx.args(node)
        if any(a.star for a in args) or len(args) > 6:
            return False
        if any(a.keyword is not None and a.keyword not in _ALLOWED for a in args):
            return False
        positional = [a for a in args if a.keyword is None]
        named = {a.keyword for a in args if a.keyword is not None}
        if any(i >= len(positional) and name not in named for i, name in enumerate(("query", "key", "value"))):
            return False
        bias = next((a for a in args if a.keyword == "attn_bias"), positional[3] if len(positional) > 3 else None)
        if bias is None:
            return True
        value = bias.value
        return isinstance(value, ast.Call) or (isinstance(value, ast.Constant) and value.value is None)
