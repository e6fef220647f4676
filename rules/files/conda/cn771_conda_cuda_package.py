"""CN771: CUDA packages in conda environment files (conda dependencies and their ``pip:`` list)."""

from __future__ import annotations

from cuda2neuron.core import Invalid, TextReport, Valid
from cuda2neuron.documents.requirements import normalise, requirement_name

from ..deps._helpers import CUDA_WHEEL_RE, DEPENDENCY_WORDS, cuda_only_package
from .._helpers import TextRule
from ._helpers import CONDA_KINDS, conda_cuda_package, is_conda_env

__all__ = ["CondaCudaPackage"]


_ENV = "environment.yml"


class CondaCudaPackage(TextRule):
    """
    ## What it does
    Reports CUDA packages in conda environment files: the CUDA toolkit and its libraries
    (``cudatoolkit=11.3``, ``cuda-toolkit``, ``cuda-nvcc``, ``cudnn``, ``nccl``, ``libcublas``,
    ``magma-cuda121``), ``pytorch-cuda=12.1``, packages from NVIDIA's channel
    (``nvidia::cuda-runtime``), CUDA builds pinned by build string
    (``pytorch=2.1.0=py3.10_cuda11.8_cudnn8.7.0_0``), and, in the ``pip:`` list, the CUDA-only
    packages and CUDA wheel indexes of CN711 / CN712 (``flash-attn``, ``xformers``,
    ``--extra-index-url https://download.pytorch.org/whl/cu121``).

    ## Why is this bad?
    ``conda env create`` on a Trainium host installs a CUDA toolkit and a CUDA build of PyTorch
    that cannot drive NeuronCores (or fails to solve), and the environment the port is validated
    in is not the one it runs in.

    ## Example
    ```yaml
    dependencies:
      - cudatoolkit=11.3
      - pytorch=1.11.0
    ```
    ``cudatoolkit`` is reported: drop it, and install the PyTorch build torch-neuronx requires.

    ## Fix safety
    Report only: removing a dependency goes with the code changes that stop needing it.
    """

    code = "CN771"
    name = "conda-cuda-package"
    file_kinds = CONDA_KINDS
    triggers = ("cudnn", "nccl", "cublas", "cu1", *DEPENDENCY_WORDS)
    VALID = (
        Valid("name: env\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch=2.5.0=*cpu*\n", path=_ENV),
        # Not a conda environment: a project's own dependency list in a config.
        Valid("model:\n  dependencies:\n    - cudatoolkit\n", path="config/train.yaml"),
    )
    INVALID = (
        Invalid("name: ldm\nchannels:\n  - pytorch\ndependencies:\n  - cudatoolkit=11.3\n  - pytorch=1.11.0\n", path=_ENV),
        Invalid("name: e\ndependencies:\n  - pytorch-cuda=12.1\n  - nvidia::cuda-nvcc\n", path=_ENV),
        Invalid("name: e\ndependencies:\n  - pytorch=2.1.0=py3.10_cuda11.8_cudnn8.7.0_0\n", path=_ENV),
        Invalid("name: e\ndependencies:\n  - pip\n  - pip:\n    - flash-attn==2.5.8\n    - --extra-index-url https://download.pytorch.org/whl/cu121\n", path=_ENV),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for document in range(doc.documents):
            if not is_conda_env(doc, document):
                continue
            for s in doc.scalars:
                if s.document != document or len(s.path) < 2 or s.path[0] != "dependencies":
                    continue
                if len(s.path) == 2 and isinstance(s.path[1], int):
                    info = conda_cuda_package(s.value)
                    if info is not None:
                        what, instead, effort = info
                        out.append(TextReport(s.start, s.end, f"`{s.value}` is {what}", guidance=instead, effort=effort))
                elif len(s.path) == 4 and s.path[2] == "pip":
                    out += _pip_item(s)
        return out


def _pip_item(s) -> list[TextReport]:  # noqa: ANN001 - a documents.structured.Scalar
    value = s.value.strip()
    if value.startswith("-") and CUDA_WHEEL_RE.search(value):
        return [TextReport(
            s.start, s.end, f"`{value}` installs from a CUDA wheel index",
            guidance="install from PyPI or the Neuron pip repository instead",
        )]
    name = requirement_name(value.removeprefix("-e ").strip())
    info = cuda_only_package(normalise(name)) if name else None
    if info is not None:
        what, instead, effort = info
        return [TextReport(s.start, s.end, f"`{normalise(name)}` is CUDA-only: {what}", guidance=instead, effort=effort)]
    if CUDA_WHEEL_RE.search(value):
        return [TextReport(s.start, s.end, f"`{value}` pins a CUDA build", guidance="pin the CPU build torch-neuronx requires")]
    return []
