"""The coarse trigger prefilter: can any rule fire on this file at all?

Reading the rules' own trigger words means importing the rule catalog, and the catalog imports
libcst (about a quarter of a second). Most files of a project mention no CUDA word, so each kind
keeps a few words of its own (``COARSE_WORDS``): a file that contains none of them is left alone
with the catalog unloaded.

The contract, enforced by tests/kinds/test_coarse_triggers.py: every trigger of every catalog
rule contains one of the coarse words of each file kind the rule reads (as keys compare, so
"cuda" covers "is_cuda", "CUDA_VISIBLE_DEVICES" and "torch.cuda import"). A rule defined outside
the catalog is admitted by ``cuda2neuron.core`` when its class is created; those of its words
that no coarse word covers join the prefilter here. Matching ignores case and reads ``-`` as
``_`` (``core.key_folded``), as the rules that compare setting keys do (``Rule.triggers_as_keys``:
``--Use-Flash-Attn`` is CN627's ``flash_attn``): the few extra files this lets through only cost
the exact per-rule check.
"""

from __future__ import annotations

from functools import lru_cache

from cuda2neuron.core import admitted, admitted_version, key_folded, key_folded_text

__all__ = ["COARSE_WORDS", "covers", "may_trigger", "words_for"]

_PYTHON = (
    "cuda", "cudnn", ".to(", "device",
    # legacy tensor types (DoubleTensor is covered by "double")
    "FloatTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor", "CharTensor", "ShortTensor",
    "IntTensor", "LongTensor", "BoolTensor",
    "cublas", "nvtx", "allow_tf32", "reduced_precision_reduction", "set_float32_matmul_precision",
    "autocast", "GradScaler", "custom_fwd", "custom_bwd",
    "nccl", "init_process_group", "DataParallel", "data_parallel", "gloo",
    "compile", "_inductor",
    # CN502: CUDA compile modes kept for a later torch.compile(**kwargs)
    "max-autotune", "reduce-overhead",
    "triton", "cpp_extension", "flash_attn", "xformers", "apex", "bitsandbytes", "fused", "sdp",
    # CN602: a CUDA source named in a literal (an Extension's sources, a kernel generator)
    '.cu"', ".cu'", '.cuh"', ".cuh'",
    "profiler", "cupy", "nvml", "nvidia", "gpustat", "GPUtil", "nvitop", "elapsed_time",
    # CUDA-only kernel packages and languages (rules/_shared/cuda_kernels.toml), hub kernels, FP8
    "tilelang", "cutlass", "helion", "numba", "conv1d", "mamba", "dropout_layer_norm", "rotary_emb", "xentropy", "amp_C",
    "deepspeed", "liger", "flashinfer", "vllm", "flash_mla", "deep_gemm", "deep_ep", "sgl_kernel",
    "transformer_engine", "natten", "nvdiffrast", "gsplat", "gaussian", "simple_knn", "sageattention",
    "tensorrt", "polygraphy", "ExecutionProvider", "mslk", "isaacgym", "lmdeploy",
    "get_kernel", "get_local_kernel", "load_kernel", "kernelize", "use_kernel_forward_from_hub",
    "_scaled_", "float8", "int4pack",
    "float64", "double", "complex", "sparse", "polar", "cfloat", "chalf", "view_as_real", "fft",
    # CN805: a NumPy array (float64 by default) moved to the device, then indexed and cast
    "from_numpy",
    "multiprocessing", "ProcessPoolExecutor", "fork",
    "rng_state_all",
    # CN210: CUDA out-of-memory handlers (torch.cuda.OutOfMemoryError is covered by "cuda")
    "OutOfMemoryError", "out of memory",
    # Lightning's Trainer/Fabric(accelerator=...) (CN108); torchao.float8 (CN616's kernel table)
    "accelerator", "torchao",
    # CUDA-only libraries used without the word (issue 29): MoE kernel packages (CN616's table),
    # Lightning's GPU count (CN108), Hugging Face quantization configs (CN625), Trainer optimizer
    # names (CN626), integer GPU ordinals of a device map (CN111), library GradScalers (CN304) and
    # reads of a scaler's state (CN308)
    "megablocks", "grouped_gemm", "tutel", "scattermoe", "fmoe",
    # mmcv's compiled ops (CN616's row for its deformable convolutions)
    "mmcv",
    "gpus", "distributed_backend",
    # ONNX Runtime GenAI's short provider names (CN622), items of `key=value` strings (CN627)
    "onnxruntime", "load_in_", "parallelize", "quantization_bit", "optim=",
    "gptq", "awq", "eetq", "fp8", "higgs", "vptq", "spqr", "fpquant", "4bit", "8bit",
    "32bit", "ademamix", "rmsprop_bnb",
    "max_memory", "NativeScaler", "scaler.state_dict()[", "scaler._scale",
    # transformers' bfloat16 probe (CN213; its CUDA probes are covered by "cuda")
    "bf16_gpu",
    # library settings and resources that choose CUDA (CN627, rules/_shared/library_settings.toml):
    # flash-attention values, TrainingArguments(tf32=), accelerate's dynamo backend, Ray's
    # "GPU" resource and use_gpu, Kaggle's enable_gpu, ray.util.collective groups, serverless gpu="A100",
    # vLLM's weight-transfer engine
    "flash_attention", "tf32", "dynamo_backend", '"gpu"', "'gpu'", "use_gpu", "enable_gpu", "varlen_attn", "gpu=", "collective_group",
    "WeightTransferConfig",
    # litgpt's quantize="bnb.nf4"; a Lightning Trainer / Fabric left to choose its accelerator (CN108)
    "bnb.", "lightning",
    # accelerate's planned placements (device_map="auto"), llm-foundry's attention and
    # feed-forward choices (attn_impl="flash", ffn_type="mb_dmoe")
    "device_map", "attn_impl", "ffn_type",
)  # fmt: skip
_SHELL = (
    "cuda", "cudnn", "cublas", "nvidia", "nccl", "nvcc", "nproc", "num_gpus", "num-gpus", "device", "install",
    # scheduler GPU requests (#SBATCH --gpus=8, --gres=gpu:8, #PBS -l ngpus=4, #BSUB -gpu);
    # containers started for GPUs (docker run --gpus, apptainer --nv)
    "gpu", "gres", "docker", "podman", "nerdctl", "singularity", "apptainer", "--nv", "nvcr.io", "-image",
    # library settings passed as flags (CN709; CN737 in configs): rules/_shared/library_settings.toml
    "flash_attn", "flash_attention", "xformers", "tf32", "load_in_", "quantization_bit", "optim", "deepspeed",
    "dynamo_backend", "compile_backend", "liger", "bnb.", "varlen_attn", "attn_", "attention", "ffn_type",
    # lm-evaluation-harness's switch inside `--model_args k=v,...` lists (CN709's list reader)
    "parallelize",
    # Slurm node features naming a GPU (CN706: --constraint=volta32gb)
    "constraint",
    # CUDA extensions' build switches without a CUDA word (CN705: CAUSAL_CONV1D_FORCE_BUILD=TRUE pip wheel .)
    "force_build", "force_cxx11_abi",
    # CUDA-only packages built from their repositories (CN713: `git clone .../NVIDIA/apex`,
    # `DEEP_EP_URL=https://github.com/deepseek-ai/DeepEP@v1`): rules/files/deps/_helpers.REPOSITORY_WORDS
    "apex", "bitsandbytes", "triton", "mamba", "conv1d", "grouped_gemm", "groupedgemm", "megablocks", "tutel",
    "deepep", "deep_ep", "deepgemm", "deep_gemm", "flashinfer", "sageattention", "transformerengine", "transformer_engine",
    "exllamav2",
)  # fmt: skip
_REQUIREMENTS = (
    "cu", "apex", "flash", "xformers", "bitsandbytes", "triton", "nvidia", "nvml", "gpustat",
    "tensorrt", "onnxruntime", "liger", "mamba", "conv1d", "mslk", "transformer", "kernels", "megablocks", "grouped",
    "tutel", "sageattention", "gptq", "awq", "exllama", "deep_ep", "deepep", "deep_gemm", "deepgemm",
    # NVIDIA RAPIDS ("cu" covers most; the config kinds take this list without "cu"), CUDA extras
    "cudf", "cuml", "cugraph", "cuspatial", "cuvs", "cucim", "raft", "rmm", "ucx", "gpu",
)  # fmt: skip

# What the structured-config rules (CN73x, CN76x, CN77x) look for: CUDA and NVIDIA words, GPU
# requests and counts, CUDA image tags (cu121), accelerate's MULTI_GPU, CI runner labels, and
# the CUDA-only packages a conda environment's pip list may name.
# ("cu", the requirements files' word for wheel tags, would let nearly every config through.)
_CONFIG = (
    "cuda", "cudnn", "cublas", "cupy", "nccl", "nvcc", "gpu", "cu1", "runs-on", "tags", *(w for w in _REQUIREMENTS if w != "cu"),
    # library settings (CN737, rules/_shared/library_settings.toml); "flash" and "xformers" come above
    "tf32", "load_in_", "quantization_bit", "optim", "deepspeed", "dynamo_backend", "compile_backend",
    "train_micro_batch_size_per_gpu", "steps_per_print", "wall_clock_breakdown", "bnb.", "accelerators", "varlen_attn",
    # accelerate's device maps and memory plans keyed by GPU index (CN738), and its planned
    # placements (device_map: auto); TRL's vLLM generation; llm-foundry's feed-forward layers
    "max_memory", "device_map", "use_vllm", "vllm_mode", "ffn_type", "attn_", "attention",
)  # fmt: skip
# A notebook runs the Python rules on its code cells and the shell rules on `!` lines, so its
# words include theirs; "cuda" is what its own rules (CN721, CN722) look for.
COARSE_WORDS: dict[str, tuple[str, ...]] = {
    "python": _PYTHON,
    "shell": _SHELL,
    "requirements": _REQUIREMENTS,
    "notebook": (*_PYTHON, *_SHELL, "cuda"),
    # YAML also runs the shell rules on its shell view (`run:` blocks, `command:`).
    "config": (*_SHELL, *_CONFIG),
    "json": _CONFIG,
    "toml": _CONFIG,
    "ini": _CONFIG,
    # Makefile recipes run the shell rules.
    "build": (*_SHELL, "cuda", "nvcc", "cudnn", "cublas", "sm_", ".cu"),
    "cuda-source": ("cuda", "__global__"),
    # RUN / ENV lines go to the shell rules; FROM lines to the Dockerfile's own.
    "dockerfile": (*_SHELL, "cuda", "nvidia", "cu1"),
}

# Kinds whose files also run the rules of other kinds (a notebook runs Python and shell rules).
_ALSO_RUN: dict[str, tuple[str, ...]] = {
    "notebook": ("python", "shell"), "dockerfile": ("shell",), "config": ("shell",), "build": ("shell",),
}


def covers(word: str, trigger: str) -> bool:
    return key_folded_text(word) in key_folded_text(trigger)


def words_for(kind: str) -> tuple[str, ...]:
    own = COARSE_WORDS.get(kind, ())
    extra = set()
    for k in (kind, *_ALSO_RUN.get(kind, ())):
        extra.update(t for t in admitted(k) if not any(covers(w, t) for w in own))
    return own + tuple(sorted(extra))


@lru_cache(maxsize=32)
def _folded(kind: str, text_type: type, version: int) -> tuple:  # noqa: ARG001 - cache key
    words = {key_folded_text(w) for w in words_for(kind)}
    return tuple(sorted(words) if text_type is str else sorted(w.encode("ascii") for w in words))


def may_trigger(data: bytes | str, kind: str) -> bool:
    """False only when no rule reading ``kind`` files can fire on ``data``.

    One folded copy (lower case, ``-`` read as ``_``) and a substring search per word: a
    case-insensitive regex alternation of the same words is about fifteen times slower on a
    large file that holds none of them. Bytes are searched raw: every word is ASCII, and ASCII
    bytes mean the same in every encoding a source may declare (UTF-16 sources are not valid
    Python files).
    """
    folded = key_folded(data) if isinstance(data, bytes) else key_folded_text(data)
    return any(w in folded for w in _folded(kind, type(data), admitted_version()))  # type: ignore[operator]
