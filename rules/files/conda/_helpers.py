"""Helpers of the conda environment rules (CN77x): what a file is, and which conda packages are CUDA."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort

from ..config._helpers import CONFIG_KINDS

__all__ = ["CONDA_KINDS", "conda_cuda_package", "conda_spec_name", "is_conda_env"]

# environment.yml is YAML; `conda env export --json` writes the same shape as JSON.
CONDA_KINDS = CONFIG_KINDS
_SPEC_RE = re.compile(r"(?:(?P<channel>[\w.-]+)::)?(?P<name>[A-Za-z0-9_][\w.-]*)(?P<rest>.*)")
_TOOLKIT = "drop it: a Trainium environment gets its runtime from the Neuron SDK (torch-neuronx), not the CUDA toolkit"
# Conda packages that are (or pull) the CUDA toolkit, its libraries or a CUDA build of a framework.
_CONDA: dict[str, tuple[str, str, Effort]] = {
    "cudatoolkit": ("the CUDA toolkit", _TOOLKIT, Effort.LOW),
    "cudatoolkit-dev": ("the CUDA toolkit (with nvcc)", _TOOLKIT, Effort.LOW),
    "cuda-toolkit": ("the CUDA toolkit", _TOOLKIT, Effort.LOW),
    "cuda": ("the CUDA toolkit", _TOOLKIT, Effort.LOW),
    "cuda-nvcc": ("the CUDA compiler", "drop it: CUDA kernels are ported to NKI, which needs no nvcc", Effort.LOW),
    "cudnn": ("cuDNN", _TOOLKIT, Effort.LOW),
    "nccl": ("NCCL", 'drop it: the "neuron" process-group backend needs no NCCL', Effort.LOW),
    "pytorch-cuda": (
        "the CUDA build selector of the pytorch channel",
        "drop it and install the PyTorch build that torch-neuronx requires",
        Effort.LOW,
    ),
    "pytorch-gpu": ("a CUDA build of PyTorch", "install the PyTorch build that torch-neuronx requires", Effort.LOW),
    "cupy": ("CuPy (CUDA arrays)", "use torch tensors on the neuron device, or numpy on the host", Effort.MEDIUM),
    "pynvml": ("pynvml (NVIDIA management library)", "monitor with `neuron-monitor` / `neuron-top`", Effort.LOW),
}
_CONDA_PREFIXES = ("cuda-", "libcu", "libnv", "libnccl", "magma-cuda", "cupy-cuda")
# A CUDA build string: `pytorch=2.1.0=py3.10_cuda11.8_cudnn8.7.0_0`, `pytorch=*=*cuda*`.
_CUDA_BUILD_RE = re.compile(r"cuda|cudnn|(?<![a-z])cu\d{2,3}(?!\d)", re.IGNORECASE)


def is_conda_env(doc, document: int = 0) -> bool:  # noqa: ANN001 - a documents.structured.ConfigDocument
    """A conda environment file: a ``dependencies`` list beside ``channels`` or ``name`` (or a
    file named like one)."""
    top = doc.top_keys(document)
    if "dependencies" not in top:
        return False
    name = doc.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return bool(top & {"channels", "name", "prefix"}) or "environment" in name or name.startswith(("env", "conda"))


def conda_spec_name(spec: str) -> tuple[str, str, str] | None:
    """(channel, name, the rest) of a conda match spec: ``nvidia::cuda-toolkit=12.1``."""
    m = _SPEC_RE.fullmatch(spec.strip())
    if m is None:
        return None
    return m.group("channel") or "", m.group("name").lower(), m.group("rest")


def conda_cuda_package(spec: str) -> tuple[str, str, Effort] | None:
    """What a conda dependency is and what to do instead, if it is CUDA-specific."""
    parsed = conda_spec_name(spec)
    if parsed is None:
        return None
    channel, name, rest = parsed
    if name in _CONDA:
        return _CONDA[name]
    if name.startswith(_CONDA_PREFIXES):
        return ("a CUDA library", _TOOLKIT, Effort.LOW)
    if channel == "nvidia":
        return ("a package of NVIDIA's CUDA channel", _TOOLKIT, Effort.LOW)
    if name in ("pytorch", "torch", "torchvision", "torchaudio", "jax", "jaxlib", "tensorflow") and _CUDA_BUILD_RE.search(rest):
        return (f"a CUDA build of {name}", "install the PyTorch build that torch-neuronx requires", Effort.LOW)
    return None
