"""CN704: ``NCCL_*`` variables set in launch scripts."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import ShellScript

from .._helpers import TextRule

__all__ = ["NcclEnvVarInScript"]


_NCCL_ENV_RE = re.compile(r"(?:TORCH_)?NCCL_\w+")


class NcclEnvVarInScript(TextRule):
    """
    ## What it does
    Reports ``NCCL_*`` variables set in launch scripts. PyTorch's ``TORCH_NCCL_*`` count too.

    ## Why is this bad?
    TorchNeuron's ``neuron`` process-group backend does not use NCCL: the variables have no
    effect, and tuning meant for NCCL (``NCCL_IB_DISABLE``, ``NCCL_SOCKET_IFNAME``) gives a false
    sense of configuration. Multi-node Trainium traffic goes over EFA.

    ## Example
    ```bash
    export NCCL_DEBUG=INFO
    ```
    Delete the line for Trainium runs (keep it in a CUDA-only script).

    ## Fix safety
    Report only; with ``--target accelerator`` the variables are kept silently because the
    script must still run on GPUs.
    """

    code = "CN704"
    name = "nccl-env-var-in-script"
    file_kinds = frozenset({"shell"})
    targets = frozenset({"neuron"})
    triggers = ("NCCL_",)
    VALID = (
        Valid("export OMP_NUM_THREADS=4\n", path="launch.sh"),
        Valid('echo "NCCL_DEBUG=INFO helps"\n', path="launch.sh"),
        Valid("export MY_NCCL_DEBUG=INFO\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("export NCCL_DEBUG=INFO  # ring setup\n", path="launch.sh"),
        Invalid("NCCL_IB_DISABLE=1 NCCL_P2P_LEVEL=NVL torchrun train.py\n", path="launch.sh"),
        Invalid("export TORCH_NCCL_ASYNC_ERROR_HANDLING=1\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if "NCCL_" not in doc.text:
            return []
        return [
            TextReport(
                ns, ve,
                f"`{doc.text[ns:ne]}` configures NCCL, which the neuron process-group backend does not use",
                guidance="delete it for Trainium runs (keep it only in a CUDA launch script); "
                "the neuron backend sets up its own collectives",
                effort=Effort.LOW,
            )
            for ns, ne, _vs, ve in doc.assignments(_NCCL_ENV_RE)
        ]


