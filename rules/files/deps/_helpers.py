"""Helpers of the dependency rules (CN71x): which distributions are CUDA-only, and CUDA wheel URLs."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort

__all__ = ["CUDA_WHEEL_RE", "DEPENDENCY_WORDS", "REPOSITORY_WORDS", "cuda_only_package"]


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
    # NVIDIA's FP8 / fused-layer library and Hugging Face's hub kernels (CUDA builds).
    "transformer-engine": (
        "NVIDIA Transformer Engine (CUDA FP8 and fused layers)",
        "use the plain `torch.nn` layers it wraps (bf16 on Trainium), then drop the dependency",
        Effort.MEDIUM,
    ),
    "transformer-engine-torch": (
        "NVIDIA Transformer Engine (CUDA FP8 and fused layers)",
        "use the plain `torch.nn` layers it wraps (bf16 on Trainium), then drop the dependency",
        Effort.MEDIUM,
    ),
    "kernels": (
        "Hugging Face kernels (compiled CUDA kernels fetched from the Hub)",
        "use the layers' plain PyTorch forward (`kernelize` is not needed), then drop the dependency",
        Effort.LOW,
    ),
    # Mixture-of-experts kernel packages.
    "megablocks": ("MegaBlocks (CUDA / Triton MoE kernels)", "route experts with plain PyTorch ops (a loop or `torch.bmm` over experts) or " + _NKI, Effort.HIGH),
    "grouped-gemm": ("grouped_gemm (CUDA grouped GEMM for MoE)", "use `torch.bmm` / a loop of `torch.matmul` over experts", Effort.MEDIUM),
    "tutel": ("Tutel (CUDA MoE kernels)", "route experts with plain PyTorch ops, or " + _NKI, Effort.HIGH),
    # DeepSeek's expert-parallel kernels (rules/_shared/cuda_kernels.toml [package.deep_ep] /
    # [package.deep_gemm]): built from their repositories (xtuner's image_build.sh).
    "deep-ep": (
        "DeepEP (CUDA expert-parallel communication kernels, on NVSHMEM)",
        "exchange the tokens with `torch.distributed.all_to_all_single` on the neuron process group",
        Effort.HIGH,
    ),
    "deep-gemm": ("DeepGEMM (CUDA FP8 matmul kernels)", "use `torch.matmul` in bfloat16", Effort.MEDIUM),
    # Inference and quantisation kernels.
    "flashinfer": ("FlashInfer (CUDA attention kernels)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    "flashinfer-python": ("FlashInfer (CUDA attention kernels)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    "sageattention": ("SageAttention (CUDA / Triton attention kernels)", f"call {_SDPA}, then drop the dependency", Effort.MEDIUM),
    "auto-gptq": ("AutoGPTQ (CUDA quantised matmul kernels)", "serve bf16 weights on Trainium, then drop the dependency", Effort.MEDIUM),
    "autoawq": ("AutoAWQ (CUDA quantised matmul kernels)", "serve bf16 weights on Trainium, then drop the dependency", Effort.MEDIUM),
    "exllamav2": ("ExLlamaV2 (CUDA inference kernels)", "serve bf16 weights on Trainium, then drop the dependency", Effort.MEDIUM),
    "cuda-python": ("cuda-python (CUDA driver and runtime bindings)", "port the code that uses them to torch.neuron APIs or NKI", Effort.HIGH),
    "tensorrt-llm": ("TensorRT-LLM (NVIDIA inference compiler)", 'compile with `torch.compile(backend="neuron")`', Effort.MEDIUM),
}
_RAPIDS = (
    "NVIDIA RAPIDS (CUDA dataframes and ML)",
    "use pandas / scikit-learn (or numpy) on the host, and torch tensors on the neuron device",
    Effort.MEDIUM,
)
_PREFIXES: tuple[tuple[str, tuple[str, str, Effort]], ...] = (
    ("cupy-cuda", _PACKAGES["cupy"]),
    *((name, _RAPIDS) for name in (
        "cudf", "cuml", "cugraph", "cuspatial", "cuvs", "cucim", "dask-cuda", "dask-cudf", "raft-dask", "pylibraft",
        "rmm-cu", "librmm", "ucx-py-cu",
    )),
    (
        "nvidia-",
        (
            "an NVIDIA CUDA runtime wheel",
            "drop it: the Neuron SDK brings its own runtime (torch-neuronx)",
            Effort.LOW,
        ),
    ),
)


# Words that every CUDA-only distribution name of the table above contains (rules' triggers).
DEPENDENCY_WORDS = (
    "apex", "flash", "xformers", "bitsandbytes", "triton", "cupy", "cuda", "nvidia", "nvml", "gpustat", "tensorrt",
    "onnxruntime", "liger", "mamba", "conv1d", "mslk", "transformer", "kernels", "megablocks", "grouped", "tutel",
    "sageattention", "gptq", "awq", "exllama", "cudf", "cuml", "cugraph", "cuspatial", "cuvs", "cucim", "raft",
    "rmm", "ucx", "gpu", "deep_ep", "deepep", "deep_gemm", "deepgemm",
)  # fmt: skip
# Words the URL of a CUDA-only package's repository spells (the names of the table above and of
# requirements._REPO_NAMES, as `key_folded` writes them: `-` read as `_`), where a script clones it
# or names it in a variable without `install` on the line (CN713's triggers).
REPOSITORY_WORDS = (
    "apex", "flash_attention", "flash_attn", "xformers", "bitsandbytes", "triton", "mamba", "causal_conv1d",
    "grouped_gemm", "groupedgemm", "megablocks", "tutel", "deepep", "deep_ep", "deepgemm", "deep_gemm",
    "flashinfer", "sageattention", "transformerengine", "transformer_engine", "exllamav2", "liger",
)  # fmt: skip


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
