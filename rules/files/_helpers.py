"""Helpers private to the CN7xx family (rules for files that are not Python)."""

from __future__ import annotations

import re

from cuda2neuron.core import Rule, negated_cuda_word

from .._shared.env import CUDA_ENV_RE

__all__ = [
    "CUDA_ENV_VAR_RE",
    "CUDA_IMAGE_RE",
    "CUDA_DIR_RE",
    "CUDA_LAUNCH_BLOCKING_GUIDANCE",
    "SEARCH_PATH_ENV_RE",
    "NCCL_ENV_RE",
    "NCCL_GUIDANCE",
    "GPU_COUNT_GUIDANCE",
    "NEURON_IMAGE_GUIDANCE",
    "TextRule",
    "cuda_env_guidance",
    "cuda_image",
    "names_cuda",
]


class TextRule(Rule):
    """Base of rules run by a file handler instead of the libcst dispatcher.

    Subclasses set ``file_kinds`` and implement ``check_text(doc, settings)``, returning
    ``cuda2neuron.core.TextReport``s with offsets into ``doc.text``.
    """

    abstract = True

    @classmethod
    def check_text(cls, doc, settings):  # pragma: no cover - every subclass overrides it
        raise NotImplementedError


# NVIDIA's CUDA images and NGC containers, and tags that name a CUDA or cuDNN build
# (pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime, ...:cu121): Dockerfiles (CN751), scripts that
# pull or run them (CN707), compose / Kubernetes / CI files that name them (CN763).
CUDA_IMAGE_RE = re.compile(
    r"nvidia/cuda|nvcr\.io/nvidia/|[/:\-_.]cuda(?:[\d.-]|$)|cudnn|[:\-_.]cu1\d{2}\b", re.IGNORECASE
)
_IMAGE_REF_RE = re.compile(r"[\w.-]+(?::\d+)?(?:/[\w.-]+)*(?::[\w.-]+)?(?:@sha256:[0-9a-f]+)?")


def names_cuda(value: str) -> bool:
    """Whether ``value`` (an image reference, a tag) selects a CUDA build: a CUDA word of
    ``CUDA_IMAGE_RE`` that no neighbouring word negates (``without-cuda``, ``cuda-disabled``)."""
    return any(not negated_cuda_word(value, m.start(), m.end()) for m in CUDA_IMAGE_RE.finditer(value))


def cuda_image(value: str) -> bool:
    """Whether ``value`` is an image reference (``name[:tag]``, a registry path) naming a CUDA
    or NGC image; a sentence that mentions CUDA is not one, nor a tag that names the variant
    without CUDA."""
    value = value.strip()
    return bool(value) and _IMAGE_REF_RE.fullmatch(value) is not None and names_cuda(value)


NEURON_IMAGE_GUIDANCE = (
    "use an image that ships the AWS Neuron SDK (Neuron driver and runtime, TorchNeuron) instead, "
    "and drop the layers that install the CUDA toolkit"
)
GPU_COUNT_GUIDANCE = (
    "Trainium has no GPUs to request: one process drives one NeuronCore (64 on trn2.48xlarge), so "
    "count processes in NeuronCores (torchrun --nproc_per_node) and select them with "
    "NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES"
)


# The NVIDIA container toolkit's variables (`docker run -e NVIDIA_VISIBLE_DEVICES=all`).
_NVIDIA_CONTAINER_ENV = r"NVIDIA_(?:VISIBLE_DEVICES|DRIVER_CAPABILITIES|REQUIRE_\w+|DISABLE_REQUIRE|MIG_\w+)"
# The CUDA compiler's own variables (`NVCC_APPEND_FLAGS`, `CUDACXX`), which CMake and
# torch.utils.cpp_extension read when they build CUDA code.
_NVCC_ENV = r"NVCC_\w+|TORCH_NVCC_FLAGS|CUDACXX|CUDAHOSTCXX|CUDAFLAGS|CUDA_NVCC_FLAGS|CUDA_ARCHITECTURES"
# Build switches of CUDA extensions (flash-attn's, torchvision's / detectron2's FORCE_CUDA; causal-conv1d's
# and mamba-ssm's setup.py read the same three as flash-attn's under their own prefix).
_EXTENSION_BUILD_ENV = (
    r"(?:FLASH_ATTENTION|CAUSAL_CONV1D|MAMBA)_(?:SKIP_CUDA_BUILD|FORCE_BUILD|FORCE_CXX11_ABI)|FORCE_CUDA"
)
# CUDA runtime, library and build variables (CN705 in scripts, CN734 in configs).
CUDA_ENV_VAR_RE = re.compile(f"(?:{CUDA_ENV_RE.pattern}|{_NVIDIA_CONTAINER_ENV}|{_NVCC_ENV}|{_EXTENSION_BUILD_ENV})")
# Search paths that name CUDA's or NVIDIA's library folders (`LD_LIBRARY_PATH=/usr/local/cuda/lib64`).
SEARCH_PATH_ENV_RE = re.compile(r"LD_LIBRARY_PATH|LIBRARY_PATH|PATH|CPATH|C_INCLUDE_PATH|CPLUS_INCLUDE_PATH")
CUDA_DIR_RE = re.compile(r"/usr/local/(?:cuda|nvidia)\b|\$\{?CUDA_(?:HOME|PATH|ROOT)\b|/opt/nvidia\b")
NCCL_ENV_RE = re.compile(r"(?:TORCH_)?NCCL_\w+")
NCCL_GUIDANCE = (
    "delete it for Trainium runs (keep it only in a CUDA launch script); "
    "the neuron backend sets up its own collectives"
)
# TorchNeuron's pre-release source reads NEURON_LAUNCH_BLOCKING=1 for synchronous execution (and
# its pre-release env-var doc listed it under "eager execution"). Whether the GA environment-variable
# reference (torch/reference/env-vars) lists it is not confirmed either way: that section of the GA
# page could not be read. So it is named, not written.
CUDA_LAUNCH_BLOCKING_GUIDANCE = (
    "for synchronous execution while debugging, TorchNeuron's pre-release source reads "
    "`NEURON_LAUNCH_BLOCKING=1` (not confirmed on the GA environment-variable page: check your release)"
)
_DELETE = "delete it for Trainium runs (keep it only in a CUDA launch script)"


def cuda_env_guidance(name: str) -> str:
    """What to do about the CUDA variable ``name`` on Trainium."""
    if name == "CUDA_LAUNCH_BLOCKING":
        return f"{_DELETE}; {CUDA_LAUNCH_BLOCKING_GUIDANCE}"
    if name.startswith("NVIDIA_"):
        return (
            "the NVIDIA container runtime reads it; give the container the Neuron devices instead "
            "(`--device=/dev/neuron0`) and delete it"
        )
    return _DELETE
