"""CN702: ``nvidia-smi`` calls in launch scripts."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.shell import ShellScript

from .._helpers import TextRule

__all__ = ["NvidiaSmiCall"]


_NVIDIA_SMI_RE = re.compile(r"(?<![\w.-])nvidia-smi(?![\w-])")


class NvidiaSmiCall(TextRule):
    """
    ## What it does
    Reports ``nvidia-smi`` calls in launch scripts and notebook shell lines. Any invocation
    counts: ``!nvidia-smi``, ``NGPUS=$(nvidia-smi -L | wc -l)``, ``command -v nvidia-smi``.

    ## Why is this bad?
    ``nvidia-smi`` ships with the NVIDIA driver and does not exist on Trainium hosts: the script
    fails (or, with ``|| true``, silently counts zero devices).

    ## Example
    ```bash
    nvidia-smi --query-gpu=name --format=csv
    ```
    Use ``neuron-ls`` to list Neuron devices and NeuronCores and ``neuron-top`` to watch them.

    ## Fix safety
    Report only: what the call was for (a banner, a device count, a health check) decides the
    replacement.
    """

    code = "CN702"
    name = "nvidia-smi-call"
    file_kinds = frozenset({"shell"})
    triggers = ("nvidia-smi",)
    VALID = (
        Valid("neuron-ls\n", path="launch.sh"),
        Valid("# run nvidia-smi to check the GPUs\n", path="launch.sh"),
        Valid('echo "nvidia-smi is not needed"\n', path="launch.sh"),
        Valid("pip install nvidia-smi-exporter\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("nvidia-smi\n", path="launch.sh"),
        Invalid("NGPUS=$(nvidia-smi -L | wc -l)\n", path="launch.sh"),
        Invalid('echo "$(/usr/bin/nvidia-smi -L | wc -l) GPUs"\n', path="launch.sh"),
        Invalid("if command -v nvidia-smi >/dev/null; then echo gpu; fi\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        if "nvidia-smi" not in doc.text:
            return []
        return [
            TextReport(
                m.start(), m.end(),
                "`nvidia-smi` is NVIDIA-only and is not installed on Trainium hosts",
                guidance="list Neuron devices and NeuronCores with `neuron-ls`, watch them with "
                "`neuron-top`; drop GPU checks that depend on nvidia-smi",
                effort=Effort.LOW,
            )
            for m in doc.code_matches(_NVIDIA_SMI_RE)
        ]


