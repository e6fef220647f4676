"""CN711–CN712: dependencies on CUDA-only packages and CUDA wheel indexes.

Checked in ``requirements*.txt`` (also ``requirements/*.txt``) and in ``pyproject.toml``
(``project.dependencies``, ``project.optional-dependencies``, ``dependency-groups``). The
project's own ``[tool.cuda2neuron]`` table is configuration and is read by the engine.
"""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Valid
from cuda2neuron.documents.requirements import DependencyDoc, normalise, requirement_name
from cuda2neuron.documents.shell import ShellScript, unquote, word_end
from cuda2neuron.core import TextReport

from ._files_util import TextRule

__all__ = ["CudaOnlyDependency", "CudaOnlyPackageInstall", "CudaWheelIndex", "cuda_only_package"]

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


_REQ = "requirements.txt"


class CudaOnlyDependency(TextRule):
    """
    ## What it does
    Reports dependencies on CUDA-only packages in requirements files and pyproject.toml. The
    packages: apex, flash-attn, xformers, bitsandbytes, triton, cupy / cupy-cuda*, pycuda,
    pynvml / nvidia-ml-py, the ``nvidia-*`` CUDA runtime wheels, TensorRT, onnxruntime-gpu and
    CUDA kernel packages (mamba-ssm, causal-conv1d, liger-kernel). The pyproject tables:
    ``project.dependencies``, optional dependencies, ``dependency-groups``, Poetry's tables.

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
    file_kinds = frozenset({"requirements"})
    triggers = ("apex", "flash", "xformers", "bitsandbytes", "triton", "cupy", "cuda", "nvidia", "nvml",
                "gpustat", "tensorrt", "onnxruntime", "liger", "mamba", "conv1d")
    VALID = (
        Valid("torch>=2.3\nnumpy  # flash-attn is optional\n", path=_REQ),
        Valid("apexlib==1.0\n", path=_REQ),
        Valid('[project]\nname = "x"\ndependencies = ["torch>=2.6"]\n# "flash-attn"\n', path="pyproject.toml"),
        Valid('[project]\nname = "x"\n[tool.other]\nextra = ["flash-attn"]\n', path="pyproject.toml"),
    )
    INVALID = (
        Invalid("flash-attn>=2.5.0\n", path=_REQ),
        Invalid("Flash_Attn==2.5.8 --hash=sha256:abc\n", path=_REQ),
        Invalid("bitsandbytes>=0.43  # 8-bit AdamW\n", path=_REQ),
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
                continue
            what, instead, effort = info
            out.append(TextReport(
                dep.start, dep.end,
                f"`{dep.name}` is CUDA-only: {what}",
                guidance=instead,
                effort=effort,
            ))
        return out


_CUDA_WHEEL_RE = re.compile(r"[/+]cu\d{2,3}(?![\d])")
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
            if _CUDA_WHEEL_RE.search(index.url):
                out.append(TextReport(
                    index.start, index.end,
                    f"`{index.url}` serves CUDA builds of PyTorch",
                    guidance="install torch from the CPU index (https://download.pytorch.org/whl/cpu) "
                    "or the Neuron pip repository, at the version your torch-neuronx release supports",
                    effort=Effort.LOW,
                ))
        for dep in doc.dependencies:
            if dep.name in _TORCH_FAMILY and _CUDA_WHEEL_RE.search(dep.spec):
                out.append(TextReport(
                    dep.start, dep.end,
                    f"`{dep.spec}` pins a CUDA build of {dep.name}",
                    guidance="drop the `+cuXXX` local version: pin the CPU build that your "
                    "torch-neuronx release supports",
                    effort=Effort.LOW,
                ))
        return out


_PIP_INSTALL_RE = re.compile(r"(?<![\w.-])(?:pip3?|uv pip|python3? -m pip)[ \t]+install(?![\w-])")
# pip options that take a value (the value is not a requirement).
_PIP_VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--python-version",
    "--platform", "--implementation", "--abi", "--progress-bar", "--log", "--cache-dir",
    "--trusted-host", "--upgrade-strategy", "-C", "--config-settings", "--global-option",
})
_PIP_INDEX_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})


class CudaOnlyPackageInstall(TextRule):
    """
    ## What it does
    Reports ``pip install`` of CUDA-only packages or from a CUDA wheel index. Launch scripts
    and notebooks (``!pip install``, ``%pip install``) are read; the packages are CN711's list
    (flash-attn, xformers, apex, bitsandbytes, triton, ...) and the indexes CN712's
    (``--index-url https://download.pytorch.org/whl/cu121``).

    ## Why is this bad?
    Setup scripts and the first cell of a notebook install the CUDA stack before anything runs:
    on a Trainium host the install fails (no CUDA toolkit to build against) or drags in CUDA
    wheels that are never used.

    ## Example
    ```bash
    pip install flash-attn --no-build-isolation
    ```
    Port the code to ``torch.nn.functional.scaled_dot_product_attention`` and drop the install.

    ## Fix safety
    Report only: the install can go once the code that imports the package has been ported.
    """

    code = "CN713"
    name = "cuda-only-package-install"
    file_kinds = frozenset({"shell"})
    triggers = ("install",)
    VALID = (
        Valid("pip install numpy einops\n", path="setup_env.sh"),
        Valid("pip install -r requirements.txt\n", path="setup_env.sh"),
        Valid("echo 'pip install flash-attn'\n", path="setup_env.sh"),
        Valid("# pip install xformers\n", path="setup_env.sh"),
    )
    INVALID = (
        Invalid("pip install flash-attn --no-build-isolation\n", path="setup_env.sh"),
        Invalid("python -m pip install -U 'bitsandbytes>=0.43' numpy\n", path="setup_env.sh"),
        Invalid("pip3 install torch --index-url https://download.pytorch.org/whl/cu121\n", path="setup_env.sh"),
        Invalid("uv pip install \\\n    xformers \\\n    triton\n", path="setup_env.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        if "install" not in text:
            return []
        out: list[TextReport] = []
        for m in doc.code_matches(_PIP_INSTALL_RE):
            i = m.end()
            expect_value: str | None = None
            while i < len(text):
                # Skip blanks and `\` line continuations; stop at the end of the command.
                while i < len(text) and text[i] in " \t":
                    i += 1
                if text.startswith("\\\n", i) or text.startswith("\\\r\n", i):
                    i += 2 if text[i + 1] == "\n" else 3
                    continue
                if i >= len(text) or text[i] in "\r\n;&|)#":
                    break
                end = word_end(text, i)
                if end == i:
                    break
                word = unquote(text[i:end]) or ""
                if expect_value is not None:
                    if expect_value in _PIP_INDEX_OPTIONS and _CUDA_WHEEL_RE.search(word):
                        out.append(TextReport(
                            i, end, f"`{word}` serves CUDA builds of PyTorch",
                            guidance="install torch from the CPU index (https://download.pytorch.org/whl/cpu) "
                            "or the Neuron pip repository",
                            effort=Effort.LOW,
                        ))
                    expect_value = None
                elif word.startswith("-"):
                    option, eq, value = word.partition("=")
                    if option in _PIP_VALUE_OPTIONS and not eq:
                        expect_value = option
                    elif option in _PIP_INDEX_OPTIONS and _CUDA_WHEEL_RE.search(value):
                        out.append(TextReport(
                            i, end, f"`{value}` serves CUDA builds of PyTorch",
                            guidance="install torch from the CPU index or the Neuron pip repository",
                            effort=Effort.LOW,
                        ))
                else:
                    name = requirement_name(word)
                    info = cuda_only_package(normalise(name)) if name else None
                    if info is not None:
                        what, instead, effort = info
                        out.append(TextReport(
                            i, end, f"installs `{normalise(name)}`, which is CUDA-only: {what}",
                            guidance=instead, effort=effort,
                        ))
                i = end
        return out
