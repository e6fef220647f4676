"""CN711: dependencies on CUDA-only packages in requirements files and ``pyproject.toml``.

Checked in ``requirements*.txt`` (also ``requirements/*.txt``) and in ``pyproject.toml``
(``project.dependencies``, ``project.optional-dependencies``, ``dependency-groups``; also
``pyproject-*.toml`` and ``requirements/*.toml``). The project's own ``[tool.cuda2neuron]``
table is configuration and is read by the engine.
"""

from __future__ import annotations

import re

from cuda2neuron.core import Invalid, TextReport, Valid
from cuda2neuron.documents.requirements import DependencyDoc

from .._helpers import TextRule
from ._helpers import DEPENDENCY_WORDS, cuda_only_package

__all__ = ["CudaOnlyDependency"]


_REQ = "requirements.txt"
# `xgboost[cuda12]`, `jax[cuda12_pip]`, `mlx[cuda]`, `tensorflow[and-cuda]`, `faiss[gpu]`: an extra
# that selects a CUDA build of a package that is not CUDA-only itself.
_CUDA_EXTRA_RE = re.compile(r"^[^\[;]*\[[^\]]*?\b((?:and-)?cuda[\w.-]*|gpu|cu1\d{1,2})\b[^\]]*\]", re.IGNORECASE)


class CudaOnlyDependency(TextRule):
    """
    ## What it does
    Reports dependencies on CUDA-only packages in requirements files and pyproject.toml. The
    packages: apex, flash-attn, xformers, bitsandbytes, triton, cupy / cupy-cuda*, pycuda,
    pynvml / nvidia-ml-py, the ``nvidia-*`` CUDA runtime wheels, TensorRT, onnxruntime-gpu and
    CUDA kernel packages (mamba-ssm, causal-conv1d, liger-kernel), NVIDIA Transformer Engine,
    Hugging Face ``kernels``, MoE kernels (megablocks, grouped_gemm, tutel), inference and
    quantisation kernels (FlashInfer, SageAttention, AutoGPTQ, AutoAWQ, ExLlamaV2, TensorRT-LLM),
    cuda-python and NVIDIA RAPIDS (cudf, cuml, dask-cuda, ...), and any package asked for with a
    CUDA extra (``xgboost[cuda12]``, ``jax[cuda12]``, ``mlx[cuda]``, ``tensorflow[and-cuda]``).
    The pyproject tables: ``project.dependencies``, optional dependencies,
    ``dependency-groups``, Poetry's tables; ``setup.cfg``'s ``install_requires`` and
    ``extras_require``.

    ## Why is this bad?
    On a Trainium host these packages fail to build or install (no CUDA toolkit), or install and
    fail at import, or silently fall back. Each has a PyTorch or Neuron replacement, named in the
    finding's guidance.

    ## Example
    ```text
    flash-attn>=2.5.0
    ```
    Replace the calls with ``torch.nn.functional.scaled_dot_product_attention``, then drop the
    line.

    ## Fix safety
    Report only: the dependency can go only once the code that imports it has been ported.
    """

    code = "CN711"
    name = "cuda-only-dependency"
    # setup.cfg's install_requires / extras_require are read from the INI document.
    file_kinds = frozenset({"requirements", "ini"})
    triggers = DEPENDENCY_WORDS
    VALID = (
        Valid("torch>=2.3\nnumpy  # flash-attn is optional\n", path=_REQ),
        Valid("apexlib==1.0\n", path=_REQ),
        Valid("xgboost[dask]==3.0.2\n", path=_REQ),
        Valid('[project]\nname = "x"\ndependencies = ["torch>=2.6"]\n# "flash-attn"\n', path="pyproject.toml"),
        Valid('[project]\nname = "x"\n[tool.other]\nextra = ["flash-attn"]\n', path="pyproject.toml"),
    )
    INVALID = (
        Invalid("xgboost[cuda12]==3.0.2\n", path=_REQ),
        Invalid("[options]\ninstall_requires =\n    torch>=2.3\n    cupy-cuda12x\n", path="setup.cfg"),
        Invalid("dask-cuda>=24.4\ncudf-cu12\n", path=_REQ),
        Invalid('[tool.poetry.dependencies]\ntransformer-engine = {git = "https://github.com/NVIDIA/TransformerEngine.git"}\n', path="requirements/pyproject-te.toml"),
        Invalid("flash-attn>=2.5.0\n", path=_REQ),
        Invalid("Flash_Attn==2.5.8 --hash=sha256:abc\n", path=_REQ),
        Invalid("bitsandbytes>=0.43  # 8-bit AdamW\n", path=_REQ),
        Invalid("mslk\n", path=_REQ),
        Invalid("cupy-cuda12x\n", path="requirements-gpu.txt"),
        Invalid("nvidia-cudnn-cu12==9.1.0.70\n", path=_REQ),
        Invalid("git+https://github.com/NVIDIA/apex#egg=apex\n", path=_REQ),
        Invalid("-e git+https://github.com/Dao-AILab/flash-attention.git@v2.5.8\n", path=_REQ),
        Invalid(
            "https://example.org/wheels/flash_attn-2.5.8+cu122torch2.3-cp311-linux_x86_64.whl\n",
            path=_REQ,
        ),
        Invalid('[project]\nname = "x"\ndependencies = [\n  "torch",\n  "xformers>=0.0.26",\n]\n', path="pyproject.toml"),
        Invalid(
            '[project]\nname = "x"\n[project.optional-dependencies]\ngpu = ["triton>=2.3", "pynvml"]\n',
            path="pyproject.toml",
        ),
        Invalid(
            '[tool.poetry.dependencies]\npython = "^3.10"\nflash-attn = {version = "^2.5", optional = true}\n',
            path="pyproject.toml",
        ),
    )

    @classmethod
    def check_text(cls, doc: DependencyDoc, settings) -> list[TextReport]:
        out = []
        for dep in doc.dependencies:
            info = cuda_only_package(dep.name)
            if info is None:
                extras = _CUDA_EXTRA_RE.search(dep.spec)
                if extras is not None:
                    out.append(TextReport(
                        dep.start, dep.end,
                        f"`{dep.spec.split(';', 1)[0].strip()}` asks for the CUDA build of `{dep.name}` (extra `{extras.group(1)}`)",
                        guidance="drop the CUDA extra: install the CPU build, and run the model's tensors on the neuron device",
                    ))
                continue
            what, instead, effort = info
            out.append(TextReport(
                dep.start, dep.end,
                f"`{dep.name}` is CUDA-only: {what}",
                guidance=instead,
                effort=effort,
            ))
        return out


