"""CN802: complex tensors on the device (``view_as_complex``, complex dtypes, FFTs)."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from .._shared.packages import in_package

__all__ = ["ComplexOnDevice"]

_NAMES = frozenset(
    {
        "torch.view_as_complex",
        "torch.view_as_real",
        "torch.polar",
        "torch.complex",
        "torch.complex32",
        "torch.complex64",
        "torch.complex128",
        "torch.cfloat",
        "torch.cdouble",
        "torch.chalf",
    }
)
_ATTRS = frozenset(q.rsplit(".", 1)[1] for q in _NAMES) | {"fft", "rfft", "ifft", "irfft", "fft2", "rfft2", "stft"}
# Every report is one of these names as a whole identifier, resolved to torch: the code holds
# the name and "torch" (`complex_human_instruction`, `is_complex()`, NumPy's fft hold neither).
_WORD = re.compile(rb"\b(?:" + b"|".join(sorted(a.encode() for a in _ATTRS)) + rb")\b")
_GUIDANCE = (
    "Trainium has no complex dtypes. Rewrite with real tensors: for rotary embeddings, precompute "
    "cos and sin and rotate pairs, out = cat(x1 * cos - x2 * sin, x1 * sin + x2 * cos); keep FFTs "
    "on the host (CPU) or express them as real matmuls."
)


class ComplexOnDevice(Rule):
    """
    ## What it does
    Reports complex-number tensors: ``torch.view_as_complex`` / ``view_as_real``,
    ``torch.polar``, ``torch.complex``, complex dtypes (``torch.complex64``, ``torch.cfloat``...)
    and ``torch.fft.*`` / ``torch.stft`` (which produce complex results).

    ## Why is this bad?
    The neuron device does not support complex dtypes. The common case is rotary position
    embeddings written with ``view_as_complex`` (LLaMA-style ``freqs_cis``): on Trainium those
    ops fall back to the CPU or fail.

    ## Example
    ```python
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    ```
    should become a real-valued rotation with precomputed ``cos``/``sin``.

    ## Fix safety
    No fix: the real-valued rewrite changes the shapes of the precomputed tables too.
    """

    code = "CN802"
    name = "complex-on-device"
    triggers = ("complex", "polar", "cfloat", "cdouble", "chalf", "view_as_real", "fft")
    VALID = (
        "import torch\ny = torch.cos(x) * a - torch.sin(x) * b\n",
        "import cmath\nz = cmath.polar(1j)\n",
        "import numpy as np\nf = np.fft.rfft(a)\n",  # host NumPy
    )
    INVALID = (
        Invalid("import torch\nxq_ = torch.view_as_complex(xq.reshape(4, -1, 2))\n"),
        Invalid("import torch\nfreqs_cis = torch.polar(torch.ones_like(freqs), freqs)\n"),
        Invalid("import torch\nz = torch.zeros(4, dtype=torch.complex64)\n"),
        Invalid("import torch\nspec = torch.fft.rfft(x)\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return b"torch" in code and _WORD.search(code) is not None

    def visit_Name(self, node: cst.Name) -> None:
        # `from torch import view_as_complex` then a bare call; not the attribute part of
        # `torch.view_as_complex` (visit_Attribute) nor the name inside the import statement.
        if node.value not in _ATTRS:
            return
        parent = self.context.parent
        if isinstance(parent, cst.ImportAlias) or (isinstance(parent, cst.Attribute) and parent.attr is node):
            return
        self._check(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _ATTRS:
            return
        self._check(node)

    def _check(self, node: cst.Name | cst.Attribute) -> None:
        qualified = self.qualname(node)
        if qualified is None:
            return
        if qualified in _NAMES or (in_package(qualified, ("torch.fft",)) and qualified != "torch.fft") or qualified == "torch.stft":
            self.report(
                node,
                f"`{qualified}` uses complex numbers, which the neuron device does not support",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )
