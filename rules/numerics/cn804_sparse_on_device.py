"""CN804: sparse tensors, which have no storage on the neuron device."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

__all__ = ["SparseOnDevice"]

# Torch functions and layouts that make a sparse tensor.
_NAMES = frozenset(
    {
        "torch.sparse_coo_tensor",
        "torch.sparse_csr_tensor",
        "torch.sparse_csc_tensor",
        "torch.sparse_bsr_tensor",
        "torch.sparse_bsc_tensor",
        "torch.sparse_compressed_tensor",
        "torch.sparse_coo",
        "torch.sparse_csr",
        "torch.sparse_csc",
        "torch.sparse_bsr",
        "torch.sparse_bsc",
    }
)
# Tensor methods that turn a dense tensor sparse: any receiver (a tensor has no qualified name).
_METHODS = frozenset({"to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc"})
_WORD = re.compile(rb"\bto_sparse\w*\(|\bsparse_(?:coo|csr|csc|bsr|bsc|compressed)")
_GUIDANCE = (
    "the neuron device holds strided (dense) tensors only: keep the sparse tensor on the CPU, or store "
    "it dense (`.to_dense()`, or the indices it encodes) before it reaches the device. A buffer a "
    "module registers sparse moves with `model.to(device)` and fails there."
)


class SparseOnDevice(Rule):
    """
    ## What it does
    Reports sparse tensors: ``x.to_sparse()`` (and ``to_sparse_csr()``, ``to_sparse_coo()``...),
    ``torch.sparse_coo_tensor`` / ``sparse_csr_tensor`` and the sparse layouts
    (``layout=torch.sparse_coo``).

    ## Why is this bad?
    Sparse layouts have no storage on the neuron device: moving a sparse tensor there (directly,
    or as a module buffer through ``model.to("neuron")``) or creating one there fails. Whisper
    registers its alignment heads as a sparse buffer, so ``load_model(..., device="neuron")``
    stops before the first forward.

    ## Example
    ```python
    self.register_buffer("alignment_heads", mask.to_sparse(), persistent=False)
    ```
    keep it dense (``mask``) or on the CPU.

    ## Fix safety
    No fix: whether the tensor can stay dense (memory) or must stay on the host (and be moved
    where it is used) is the user's decision.
    """

    code = "CN804"
    name = "sparse-on-device"
    triggers = ("sparse",)
    VALID = (
        "import torch\ny = x.to_dense()\n",
        "import torch\nmoe = SparseMoE(dim)\n",  # a name, no sparse layout
        "import torch\nnn.Embedding(10, 4, sparse=True)\n",  # sparse gradients: a flag, not a tensor here
    )
    INVALID = (
        Invalid('import torch\nself.register_buffer("heads", mask.to_sparse(), persistent=False)\n'),
        Invalid("import torch\ni = torch.sparse_coo_tensor(idx, vals, (3, 3))\n"),
        Invalid("import torch\nz = torch.zeros(3, 3, layout=torch.sparse_csr)\ny = x.to_sparse_csr()\n"),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return _WORD.search(code) is not None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _METHODS and self.qualname(func) is None:
            self._report(node, f"`.{func.attr.value}()`")

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not node.attr.value.startswith("sparse_"):
            return
        qualified = self.qualname(node)
        if qualified in _NAMES:
            self._report(node, f"`{qualified}`")

    def _report(self, node: cst.CSTNode, what: str) -> None:
        self.report(
            node,
            f"{what} makes a sparse tensor, which the neuron device does not support",
            guidance=_GUIDANCE,
            effort=Effort.LOW,
        )
