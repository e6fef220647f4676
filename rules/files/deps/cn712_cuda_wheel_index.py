"""CN712: CUDA wheel indexes and ``+cuXXX`` torch builds in requirements files."""

from __future__ import annotations


from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.requirements import DependencyDoc

from .._helpers import TextRule
from ._helpers import CUDA_WHEEL_RE

__all__ = ["CudaWheelIndex"]

_REQ = "requirements.txt"


_TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "torchtext", "torchdata"})


class CudaWheelIndex(TextRule):
    """
    ## What it does
    Reports CUDA wheel indexes and CUDA builds of torch in dependency files. That is
    ``--extra-index-url https://download.pytorch.org/whl/cu121``, ``[[tool.uv.index]]`` URLs,
    ``-f`` links and pins with a CUDA local version (``torch==2.3.1+cu121``).

    ## Why is this bad?
    These pull the CUDA build of PyTorch (several GB of CUDA libraries) onto a Trainium host.
    TorchNeuron needs the CPU build of torch that ``torch-neuronx`` is released against, from the
    Neuron repository.

    ## Example
    ```text
    --extra-index-url https://download.pytorch.org/whl/cu121
    torch==2.3.1+cu121
    ```
    Use the CPU index (``.../whl/cpu``) or the Neuron pip repository, and pin ``torch`` without
    ``+cu121``.

    ## Fix safety
    Report only: the right torch version is the one your ``torch-neuronx`` release supports.
    """

    code = "CN712"
    name = "cuda-wheel-index"
    file_kinds = frozenset({"requirements"})
    triggers = ("cu",)
    VALID = (
        Valid("--extra-index-url https://download.pytorch.org/whl/cpu\ntorch==2.9.0\n", path=_REQ),
        Valid("cuda-python-docs==1.0\n", path=_REQ),
        Valid('[tool.uv]\n# index = "https://download.pytorch.org/whl/cu121"\n', path="pyproject.toml"),
    )
    INVALID = (
        Invalid("--extra-index-url https://download.pytorch.org/whl/cu121\ntorch\n", path=_REQ),
        Invalid("-f https://download.pytorch.org/whl/torch_stable.html\ntorch==2.1.0+cu118\n", path=_REQ),
        Invalid("torchvision==0.18.1+cu121\n", path=_REQ),
        Invalid(
            '[[tool.uv.index]]\nname = "pytorch"\nurl = "https://download.pytorch.org/whl/cu124"\n',
            path="pyproject.toml",
        ),
    )

    @classmethod
    def check_text(cls, doc: DependencyDoc, settings) -> list[TextReport]:
        out = []
        for index in doc.indexes:
            if CUDA_WHEEL_RE.search(index.url):
                out.append(TextReport(
                    index.start, index.end,
                    f"`{index.url}` serves CUDA builds of PyTorch",
                    guidance="install torch from the CPU index (https://download.pytorch.org/whl/cpu) "
                    "or the Neuron pip repository, at the version your torch-neuronx release supports",
                    effort=Effort.LOW,
                ))
        for dep in doc.dependencies:
            if dep.name in _TORCH_FAMILY and CUDA_WHEEL_RE.search(dep.spec):
                out.append(TextReport(
                    dep.start, dep.end,
                    f"`{dep.spec}` pins a CUDA build of {dep.name}",
                    guidance="drop the `+cuXXX` local version: pin the CPU build that your "
                    "torch-neuronx release supports",
                    effort=Effort.LOW,
                ))
        return out


