"""CN708: provisioning scripts that set up NVIDIA drivers, the CUDA toolkit or the NVIDIA container stack."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import CODE, DQUOTE, SQUOTE, ShellScript, command_end

from .._helpers import TextRule

__all__ = ["NvidiaHostSetup"]


_INSTALL_RE = re.compile(r"(?<![\w./-])(?:apt-get|apt|yum|dnf|zypper|microdnf)[ \t]+(?:-\S+[ \t]+)*install(?![\w-])")
# NVIDIA's driver, CUDA and container packages (distribution packages, not pip wheels: CN713).
_PACKAGE_RE = re.compile(
    r"(?<![\w./=-])(?:nvidia-[\w.+-]+|libnvidia-[\w.+-]+|cuda(?:-[\w.+-]+)?|libcudnn[\w.+-]*|libnccl[\w.+-]*"
    r"|datacenter-gpu-manager[\w.+-]*|libcublas[\w.+-]*|cuda-keyring[\w.+-]*)(?![\w-])"
)
_TOOL_RE = re.compile(
    r"(?<![\w./-])nvidia-ctk(?![\w-])"
    # NVIDIA's Kubernetes API groups (the GPU operator's `clusterpolicies.nvidia.com`) and the
    # GPU resource read back (`.status.allocatable.nvidia\.com/gpu`).
    r"|[\w-]+\.nvidia\.com(?:/[\w.-]+)?|nvidia\\?\.com/gpu"
    # NVIDIA's apt / yum repository lists and tools installed from NVIDIA's GitHub (`go install
    # github.com/NVIDIA/nvkind/...`).
    r"|(?:sources\.list\.d|yum\.repos\.d)/[\w.-]*(?:nvidia|cuda)[\w.-]*"
    r"|(?<=install )github\.com/NVIDIA/[\w./@-]+"
    r"|https?://[^\s\"'`]*(?:nvidia\.github\.io|developer\.download\.nvidia\.com|ngc\.nvidia\.com)[^\s\"'`]*"
    r"|(?<![\w./-])(?:nvidia|nvdp)/(?:gpu-operator|nvidia-device-plugin|k8s-device-plugin)(?![\w-])"
    r"|(?<![\w./-])(?:nvidia-)?(?:k8s-)?device-plugin\.ya?ml(?![\w-])"
)
_GUIDANCE = (
    "a Trainium host needs the Neuron driver and tools (from the Neuron package repository, see the Neuron setup "
    "guide) instead of the NVIDIA driver, CUDA toolkit and container toolkit; on Kubernetes, the Neuron device "
    "plugin (helm chart oci://public.ecr.aws/neuron/neuron-helm-chart) instead of the GPU operator"
)


class NvidiaHostSetup(TextRule):
    """
    ## What it does
    Reports what provisioning scripts do to set a host up for NVIDIA GPUs: installing driver,
    CUDA and container packages (``apt-get install -y nvidia-driver-535 cuda-toolkit-12-4``,
    ``libnvidia-container1``, ``libcudnn8``), NVIDIA's package repositories and keys
    (``nvidia.github.io``, ``developer.download.nvidia.com``), ``nvidia-ctk``, and the GPU
    operator or NVIDIA device plugin on Kubernetes (``helm install nvidia/gpu-operator``).

    ## Why is this bad?
    None of it exists for Trainium: the install fails or leaves a host without a Neuron driver,
    so the ported code finds no ``neuron`` device.

    ## Example
    ```bash
    sudo apt-get install -y nvidia-driver-535 nvidia-container-toolkit
    ```
    is reported per package: install the Neuron driver and tools instead.

    ## Fix safety
    Report only: provisioning a Trainium host is a different recipe, not a rename.
    """

    code = "CN708"
    name = "nvidia-host-setup"
    file_kinds = frozenset({"shell"})
    triggers = ("nvidia", "NVIDIA", "cuda", "libcudnn", "libnccl", "device-plugin", "datacenter-gpu-manager")
    VALID = (
        Valid("sudo apt-get install -y build-essential git\n", path="setup.sh"),
        Valid("# apt-get install -y nvidia-driver-535\n", path="setup.sh"),
        Valid('echo "install nvidia-driver-535 on GPU hosts"\n', path="setup.sh"),
        Valid("pip install nvidia-ml-py\n", path="setup.sh"),
    )
    INVALID = (
        Invalid("sudo apt-get install -y nvidia-driver-535 nvidia-utils-535\n", path="setup.sh"),
        Invalid("apt-get update && apt-get install -y --no-install-recommends cuda-toolkit-12-4 libcudnn8\n", path="setup.sh"),
        Invalid("sudo nvidia-ctk runtime configure --runtime=docker\n", path="setup.sh"),
        Invalid("curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | sudo gpg --dearmor -o k.gpg\n", path="setup.sh"),
        Invalid("helm install --wait gpu-operator nvidia/gpu-operator -n gpu-operator\n", path="cluster.sh"),
        Invalid("kubectl patch clusterpolicies.nvidia.com/cluster-policy --type merge -p x\n", path="cluster.sh"),
        Invalid("kubectl get nodes -o=custom-columns=GPU:'.status.allocatable.nvidia\\.com/gpu'\n", path="cluster.sh"),
        Invalid("go install github.com/NVIDIA/nvkind/cmd/nvkind@latest\n", path="cluster.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        out: list[TextReport] = []
        for m in _TOOL_RE.finditer(text):
            if not _code_or_value(doc, m.start()):
                continue
            out.append(TextReport(
                m.start(), m.end(), f"`{m.group(0)}` sets the host up for NVIDIA GPUs",
                guidance=_GUIDANCE, effort=Effort.LOW,
            ))
        for m in doc.code_matches(_INSTALL_RE):
            end = command_end(text, m.end())
            for pkg in _PACKAGE_RE.finditer(text, m.end(), end):
                if not doc.is_code(pkg.start()):
                    continue
                out.append(TextReport(
                    pkg.start(), pkg.end(), f"`{pkg.group(0)}` installs NVIDIA's driver, CUDA or container stack",
                    guidance=_GUIDANCE, effort=Effort.LOW,
                ))
        return out


def _code_or_value(doc: ShellScript, i: int) -> bool:
    """Code, or a quoted word without spaces (a jsonpath, a resource name): not a message."""
    state = doc.states[i]
    if state == CODE:
        return True
    if state not in (SQUOTE, DQUOTE):
        return False
    quote = "'" if state == SQUOTE else '"'
    a = doc.text.rfind(quote, 0, i)
    b = doc.text.find(quote, i)
    return a != -1 and b != -1 and not any(c.isspace() for c in doc.text[a + 1:b])
