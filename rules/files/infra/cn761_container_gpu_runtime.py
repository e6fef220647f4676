"""CN761: containers given NVIDIA GPUs in docker compose and Kubernetes files."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule
from ._helpers import INFRA_KINDS, key_start

__all__ = ["ContainerGpuRuntime"]


_COMPOSE = "docker-compose.yml"
_DEVICE_GUIDANCE = (
    "give the container the Neuron devices instead (compose `devices: [\"/dev/neuron0:/dev/neuron0\"]`, "
    "`docker run --device=/dev/neuron0`; on Kubernetes the Neuron device plugin's resources) and run "
    "an image with the Neuron SDK"
)
_GPUS_OPTION = re.compile(r"(?<![\w-])(--gpus(?:[ =]\S+)?|--runtime[ =]nvidia)")


class ContainerGpuRuntime(TextRule):
    """
    ## What it does
    Reports containers set up for NVIDIA GPUs in docker compose and Kubernetes files:
    ``runtime: nvidia``, a ``deploy.resources.reservations.devices`` entry with
    ``driver: nvidia`` or ``capabilities: [gpu]``, compose's ``gpus:``, Kubernetes'
    ``runtimeClassName: nvidia``, and ``--gpus`` / ``--runtime=nvidia`` in a CI job's
    ``container: options:``.

    ## Why is this bad?
    They ask the NVIDIA container runtime for GPUs and their drivers, which a Trainium host does
    not have: the container does not start, or starts without an accelerator.

    ## Example
    ```yaml
    services:
      train:
        runtime: nvidia
        deploy:
          resources:
            reservations:
              devices:
                - driver: nvidia
                  capabilities: [gpu]
    ```
    is reported three times: map the Neuron devices into the container instead
    (``devices: ["/dev/neuron0:/dev/neuron0"]``).

    ## Fix safety
    Report only: how many Neuron devices a service gets is the project's decision.
    """

    code = "CN761"
    name = "container-gpu-runtime"
    file_kinds = INFRA_KINDS
    triggers = ("nvidia", "gpu")
    VALID = (
        Valid("services:\n  t:\n    devices:\n      - /dev/neuron0:/dev/neuron0\n", path=_COMPOSE),
        Valid("services:\n  t:\n    runtime: runc\n", path=_COMPOSE),
        Valid("model:\n  driver: nvidia-free\n", path="config/train.yaml"),
    )
    INVALID = (
        Invalid("services:\n  t:\n    runtime: nvidia\n", path=_COMPOSE),
        Invalid(
            "services:\n  t:\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
            "            - driver: nvidia\n              count: all\n              capabilities: [gpu]\n",
            path=_COMPOSE,
        ),
        Invalid("spec:\n  runtimeClassName: nvidia\n  containers: []\n", path="k8s/pod.yaml"),
        Invalid(
            "jobs:\n  t:\n    container:\n      image: my/image\n      options: --gpus all --shm-size 16gb\n",
            path=".github/workflows/gpu.yml",
        ),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            key, value = s.key, s.value.strip()
            owner = s.owner
            if key in ("runtime", "runtimeClassName") and value.lower() == "nvidia":
                message = f"`{key}: {value}` runs the container with the NVIDIA runtime"
            elif key == "driver" and value.lower() == "nvidia" and "devices" in s.path:
                message = "a device reservation with `driver: nvidia` gives the container NVIDIA GPUs"
            elif owner == "capabilities" and value.lower() == "gpu" and "devices" in s.path:
                message = "a device reservation with `capabilities: [gpu]` gives the container GPUs"
            elif key == "gpus" and "services" in s.path and value:
                message = f"`gpus: {value}` gives the service NVIDIA GPUs"
            elif key == "options" and "container" in s.path and (m := _GPUS_OPTION.search(value)) is not None:
                message = f"`{m.group(1)}` in the job container's options gives it NVIDIA GPUs"
            else:
                continue
            out.append(TextReport(
                key_start(s) if s.key is not None and owner != "capabilities" else s.start, s.end, message,
                guidance=_DEVICE_GUIDANCE, effort=Effort.LOW,
            ))
        return out
