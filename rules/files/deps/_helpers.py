"""Helpers of the dependency rules (CN71x): which distributions are CUDA-only, and CUDA wheel URLs."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort

__all__ = ["CUDA_WHEEL_RE", "cuda_only_package"]


_SDPA = "`torch.nn.functional.scaled_dot_product_attention` (routes to an NKI kernel on neuron)"
_NKI = "rewrite the kernels as NKI kernels (`@nki.jit`, registered with `torch_neuronx.nki_op`) or use plain PyTorch ops"

# normalised name -> (what it is, what to use on Trainium, effort)
_PACKAGES: dict[str, tuple[str, str, Effort]] = {
    "apex": (
        "NVIDIA apex (fused CUDA kernels)",
        "use `torch.optim.AdamW` for FusedAdam, `torch.nn.LayerNorm` for FusedLayerNorm and "
        '`torch.autocast("neuron", dtype=torch.bfloat16)` for apex.amp, then drop the dependency',
        Effort.MEDIUM,
    ),
    "flash-attn": ("flash-attn (CUDA attention kernels)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    "xformers": ("xformers (CUDA attention kernels)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    # xformers' attention kernels moved there; xformers itself now requires it.
    "mslk": ("mslk (the GPU attention kernels behind xformers)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    "bitsandbytes": (
        "bitsandbytes (CUDA-only 8-bit optimizers and quantisation)",
        "use `torch.optim.AdamW` (bf16 weights on Trainium) and drop the dependency",
        Effort.MEDIUM,
    ),
    "triton": ("Triton (GPU kernel compiler)", _NKI, Effort.HIGH),
    "pytorch-triton": ("Triton (GPU kernel compiler)", _NKI, Effort.HIGH),
    "liger-kernel": ("liger-kernel (Triton kernels)", "use the plain PyTorch layers it replaces", Effort.MEDIUM),
    "mamba-ssm": ("mamba-ssm (CUDA selective-scan kernels)", "use its pure-PyTorch reference path or " + _NKI, Effort.HIGH),
    "causal-conv1d": ("causal-conv1d (CUDA kernels)", "use `torch.nn.functional.conv1d` with left padding", Effort.MEDIUM),
    "cupy": ("CuPy (CUDA arrays)", "use torch tensors on the neuron device, or numpy on the host", Effort.MEDIUM),
    "pycuda": ("PyCUDA (CUDA driver bindings)", "port the kernels to NKI or PyTorch ops", Effort.HIGH),
    "pynvml": ("pynvml (NVIDIA management library)", "monitor with `neuron-monitor` / `neuron-top`", Effort.LOW),
    "nvidia-ml-py": ("nvidia-ml-py (NVIDIA management library)", "monitor with `neuron-monitor` / `neuron-top`", Effort.LOW),
    "nvidia-ml-py3": ("nvidia-ml-py3 (NVIDIA management library)", "monitor with `neuron-monitor` / `neuron-top`", Effort.LOW),
    "gpustat": ("gpustat (reads NVML)", "monitor with `neuron-top`", Effort.LOW),
    "tensorrt": ("TensorRT (NVIDIA inference compiler)", 'compile with `torch.compile(backend="neuron")`', Effort.MEDIUM),
    "torch-tensorrt": ("Torch-TensorRT (NVIDIA inference compiler)", 'compile with `torch.compile(backend="neuron")`', Effort.MEDIUM),
    "onnxruntime-gpu": ("the CUDA build of ONNX Runtime", 'run the model in PyTorch with `torch.compile(backend="neuron")`', Effort.MEDIUM),
}
_PREFIXES: tuple[tuple[str, tuple[str, str, Effort]], ...] = (
    ("cupy-cuda", _PACKAGES["cupy"]),
    (
        "nvidia-",
        (
            "an NVIDIA CUDA runtime wheel",
            "drop it: the Neuron SDK brings its own runtime (torch-neuronx)",
            Effort.LOW,
        ),
    ),
)


def cuda_only_package(name: str) -> tuple[str, str, Effort] | None:
    """What a normalised distribution name is and what to use instead, if it is CUDA-only."""
    if name in _PACKAGES:
        return _PACKAGES[name]
    for prefix, info in _PREFIXES:
        if name.startswith(prefix):
            return info
    return None


# A CUDA build of a wheel: `+cu121` local versions, `/whl/cu118` index paths.
CUDA_WHEEL_RE = re.compile(r"[/+]cu\d{2,3}(?![\d])")
