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
# AWS's environment-variable reference (torch/reference/env-vars, 2026-10-14):
# TORCH_NEURONX_COMPLEX_DECOMPOSE defaults to True for PyTorch >= 2.13, every torch TorchNeuron ships
# for; with it off only "verified native complex operations" lower, the rest follows the fallback
# policy. So complex code runs, decomposed, and which ops are covered is the compatibility table's word.
_GUIDANCE = (
    "TorchNeuron decomposes complex ops into real arithmetic by default (torch >= 2.13, "
    "TORCH_NEURONX_COMPLEX_DECOMPOSE); per-op coverage is in the torch-neuronx compatibility table, "
    "and an op left out falls back to the CPU. A real-valued form stays the portable and fast one: for "
    "rotary embeddings, precompute cos and sin and rotate pairs, out = cat(x1 * cos - x2 * sin, "
    "x1 * sin + x2 * cos); express FFTs as real matmuls or keep them on the host (CPU)."
)


class ComplexOnDevice(Rule):
    """
    ## What it does
    Reports complex-number tensors: ``torch.view_as_complex`` / ``view_as_real``,
    ``torch.polar``, ``torch.complex``, complex dtypes (``torch.complex64``, ``torch.cfloat``...)
    and ``torch.fft.*`` / ``torch.stft`` (which produce complex results).

    ## Why is this bad?
    The neuron device has no complex dtypes of its own: TorchNeuron decomposes complex ops into
    real arithmetic by default since PyTorch 2.13 (``TORCH_NEURONX_COMPLEX_DECOMPOSE``, AWS's
    environment-variable reference), and which ops that covers is per op (the torch-neuronx
    compatibility table); an op it leaves out runs on the CPU. So the code runs, but check it:
    the decomposed form costs more than a real-valued one, and a fallback copies to the host.
    The common case is rotary position embeddings written with ``view_as_complex`` (LLaMA-style
    ``freqs_cis``).

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
                f"`{qualified}` uses complex numbers, which the neuron device only runs decomposed into real ops: check it",
                guidance=_GUIDANCE,
                effort=Effort.MEDIUM,
            )
