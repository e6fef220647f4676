"""CN705: CUDA runtime and library variables set in launch scripts."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import ShellScript

from .._helpers import CUDA_DIR_RE, CUDA_ENV_VAR_RE, SEARCH_PATH_ENV_RE, TextRule, cuda_env_guidance

__all__ = ["CudaEnvVarInScript"]


class CudaEnvVarInScript(TextRule):
    """
    ## What it does
    Reports CUDA runtime, library and build variables set in launch scripts. Covered:
    ``CUDA_LAUNCH_BLOCKING``, ``CUDA_DEVICE_ORDER``, ``PYTORCH_CUDA_ALLOC_CONF``,
    ``TORCH_CUDA_ARCH_LIST``, ``CUDA_HOME``, ``CUBLAS_*`` / ``CUDNN_*`` and the like, and the
    NVIDIA container runtime's ``NVIDIA_VISIBLE_DEVICES`` / ``NVIDIA_DRIVER_CAPABILITIES`` and the
    CUDA compiler's ``NVCC_*`` / ``CUDACXX``, CUDA extension build switches
    (``FLASH_ATTENTION_SKIP_CUDA_BUILD``, ``FORCE_CUDA``), and search paths that name CUDA's
    folders (``LD_LIBRARY_PATH=/usr/local/cuda/lib64``)
    (``CUDA_VISIBLE_DEVICES`` is CN701's; a script's own ``CUDA_FLAG`` is not a CUDA setting).
    For ``CUDA_LAUNCH_BLOCKING`` the guidance names ``NEURON_LAUNCH_BLOCKING``, which
    TorchNeuron's pre-release source reads; it is not rewritten, because it is not confirmed
    on AWS's GA environment-variable page (its eager-execution section could not be read).

    ## Why is this bad?
    They configure the CUDA runtime, PyTorch's CUDA caching allocator or CUDA extension builds;
    on Trainium nothing reads them, so a setting the run relied on (synchronous launches for
    debugging, allocator tuning) silently stops applying.

    ## Example
    ```bash
    export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    ```
    Delete it for Trainium runs, or keep it in a CUDA-only script.

    ## Fix safety
    Report only. With ``--target accelerator`` they are kept silently (harmless on Trainium,
    needed on GPUs).
    """

    code = "CN705"
    name = "cuda-env-var-in-script"
    file_kinds = frozenset({"shell"})
    targets = frozenset({"neuron"})
    triggers = ("CUDA_", "CUDNN_", "CUBLAS", "NVIDIA_", "NVCC", "CUDACXX", "CUDAHOSTCXX", "CUDAFLAGS", "FORCE_CUDA", "FORCE_BUILD", "FORCE_CXX11_ABI", "/cuda", "/nvidia")
    VALID = (
        Valid("export NEURON_RT_VISIBLE_CORES=0-1\n", path="launch.sh"),
        Valid("echo $CUDA_HOME\n", path="launch.sh"),
        Valid("USE_CUDA=0 python setup.py develop\n", path="launch.sh"),
        Valid('CUDA_FLAG="--cuda"\npython main.py $CUDA_FLAG\n', path="launch.sh"),
    )
    INVALID = (
        Invalid("export CUDA_LAUNCH_BLOCKING=1\n", path="launch.sh"),
        Invalid("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python train.py\n", path="launch.sh"),
        Invalid("TORCH_CUDA_ARCH_LIST='8.0;9.0' pip install -e .\n", path="launch.sh"),
        # causal-conv1d's and mamba-ssm's build switches (their setup.py), as flash-attn's
        Invalid("CAUSAL_CONV1D_FORCE_BUILD=TRUE pip wheel -w /tmp/whl --no-deps .\n", path="build.sh"),
        Invalid("export MAMBA_SKIP_CUDA_BUILD=FALSE\n", path="build.sh"),
        Invalid("export CUBLAS_WORKSPACE_CONFIG=:4096:8\n", path="launch.sh"),
        Invalid("docker run -e NVIDIA_VISIBLE_DEVICES=all my-image\n", path="launch.sh"),
        Invalid('MAX_JOBS=32 NVCC_APPEND_FLAGS="--threads 32" pip install -e .\n', path="launch.sh"),
        Invalid("export FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE\npip install flash-attn\n", path="launch.sh"),
        Invalid("export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH\n", path="launch.sh"),
        Invalid("ENV LD_LIBRARY_PATH /usr/local/nvidia/lib:/usr/local/nvidia/lib64\n", path="Dockerfile"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if not any(t in doc.text for t in cls.triggers):
            return []
        out = [
            TextReport(
                ns, ve,
                f"`{doc.text[ns:ne]}` configures CUDA and has no effect on Trainium",
                guidance=cuda_env_guidance(doc.text[ns:ne]),
                effort=Effort.LOW,
            )
            for ns, ne, _vs, ve in doc.assignments(CUDA_ENV_VAR_RE)
        ]
        for ns, ne, vs, ve in doc.assignments(SEARCH_PATH_ENV_RE):
            if CUDA_DIR_RE.search(doc.text, vs, ve):
                out.append(TextReport(
                    ns, ve,
                    f"`{doc.text[ns:ne]}` adds CUDA's libraries to a search path",
                    guidance="drop the CUDA folders for Trainium (the Neuron runtime's libraries are under /opt/aws/neuron)",
                    effort=Effort.LOW,
                ))
        return out


