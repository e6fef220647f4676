"""CN734: NCCL, CUDA and NVIDIA container variables set in a config's environment."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import CUDA_ENV_VAR_RE, NCCL_ENV_RE, NCCL_GUIDANCE, TextRule, cuda_env_guidance
from ._helpers import CONFIG_KINDS, env_entries

__all__ = ["CudaEnvVarInConfig"]


_WORKFLOW = ".github/workflows/gpu.yml"


class CudaEnvVarInConfig(TextRule):
    """
    ## What it does
    Reports ``NCCL_*`` variables, CUDA runtime / allocator / build variables
    (``PYTORCH_CUDA_ALLOC_CONF``, ``CUDA_LAUNCH_BLOCKING``, ``TORCH_CUDA_ARCH_LIST``,
    ``CUDA_HOME``, ``CUBLAS_*``, ...) and the NVIDIA container runtime's ``NVIDIA_VISIBLE_DEVICES``
    / ``NVIDIA_DRIVER_CAPABILITIES`` set in the environment a config declares: CI ``env:`` /
    ``variables:``, docker compose ``environment:``, Kubernetes ``env:`` lists. (The same names
    in launch scripts and compose's ``- NAME=value`` items are CN704 / CN705.)

    ## Why is this bad?
    Nothing on a Trainium host reads them: the ``neuron`` process-group backend does not use
    NCCL, PyTorch's CUDA allocator does not run, and the NVIDIA container runtime is not there.
    A setting the job relied on (allocator tuning, synchronous launches for debugging) silently
    stops applying.

    ## Example
    ```yaml
    env:
      PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True
    ```
    Delete it for Trainium jobs. For ``CUDA_LAUNCH_BLOCKING`` the guidance names
    ``NEURON_LAUNCH_BLOCKING``, which TorchNeuron's pre-release source reads (not confirmed on
    AWS's GA environment-variable page, whose eager-execution section could not be read, so it
    is not written).

    ## Fix safety
    Report only; with ``--target accelerator`` the variables are kept silently (harmless on
    Trainium, needed on GPUs).
    """

    code = "CN734"
    name = "config-cuda-env-var"
    file_kinds = CONFIG_KINDS
    targets = frozenset({"neuron"})
    triggers = ("NCCL_", "CUDA_", "CUDNN_", "CUBLAS", "NVIDIA_", "NVCC", "CUDACXX", "CUDAHOSTCXX", "CUDAFLAGS")
    VALID = (
        Valid("env:\n  OMP_NUM_THREADS: 4\n", path=_WORKFLOW),
        Valid("env:\n  USE_CUDA: 0\n", path=_WORKFLOW),
        Valid("settings:\n  NCCL_DEBUG: INFO\n", path="config/train.yaml"),
    )
    INVALID = (
        Invalid("env:\n  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n", path=_WORKFLOW),
        Invalid("variables:\n  NCCL_DEBUG: INFO\n", path=".gitlab-ci.yml"),
        Invalid("services:\n  t:\n    environment:\n      NVIDIA_VISIBLE_DEVICES: all\n", path="docker-compose.yml"),
        Invalid("env:\n- name: CUDA_LAUNCH_BLOCKING\n  value: \"1\"\n", path="k8s/pod.yaml"),
        Invalid('{"containerEnv": {"x": 1}, "remoteEnv": {}, "env": {"NCCL_P2P_DISABLE": "1"}}\n', path="cfg.json"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for entry in env_entries(doc):
            name = entry.name
            if NCCL_ENV_RE.fullmatch(name):
                what, guidance = "configures NCCL, which the neuron process-group backend does not use", NCCL_GUIDANCE
            elif CUDA_ENV_VAR_RE.fullmatch(name):
                what, guidance = "configures CUDA and has no effect on Trainium", cuda_env_guidance(name)
            else:
                continue
            value = entry.value
            end = max(entry.name_end, value.end) if value is not None else entry.name_end
            out.append(TextReport(entry.name_start, end, f"`{name}` {what}", guidance=guidance, effort=Effort.LOW))
        return out
