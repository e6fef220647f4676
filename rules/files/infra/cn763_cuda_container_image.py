"""CN763: CUDA container images named in compose, Kubernetes and CI files."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import NEURON_IMAGE_GUIDANCE, TextRule, cuda_image
from ._helpers import INFRA_KINDS

__all__ = ["CudaContainerImage"]


class CudaContainerImage(TextRule):
    """
    ## What it does
    Reports CUDA container images named in YAML and JSON files: a compose service's or a
    Kubernetes container's ``image:``, a GitHub Actions job's ``container:`` (``image:``),
    a GitLab CI ``image:`` (``name:``), build arguments such as ``BASE_IMAGE:`` — any value under
    a key that names an image and that is a CUDA image (``nvidia/cuda``, NGC's
    ``nvcr.io/nvidia/...``, tags naming a CUDA or cuDNN build:
    ``pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel``).

    ## Why is this bad?
    The image carries the CUDA toolkit and a CUDA build of PyTorch: the ported code cannot reach
    a NeuronCore from it, and a CI job that runs the port there tests nothing Trainium runs.

    ## Example
    ```yaml
    jobs:
      test:
        container:
          image: pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel
    ```
    is reported: use an image with the AWS Neuron SDK.

    ## Fix safety
    Report only: the replacement image is the project's choice.
    """

    code = "CN763"
    name = "cuda-container-image"
    file_kinds = INFRA_KINDS
    triggers = ("cuda", "nvidia", "cudnn", "cu1")
    VALID = (
        Valid("services:\n  t:\n    image: python:3.11-slim\n", path="docker-compose.yml"),
        Valid("description: runs on the cuda image\n", path="config/train.yaml"),
        Valid("# image: nvidia/cuda:12.1.0-base\n", path="docker-compose.yml"),
    )
    INVALID = (
        Invalid("jobs:\n  t:\n    container:\n      image: pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel\n", path=".github/workflows/gpu.yml"),
        Invalid("jobs:\n  t:\n    container: nvcr.io/nvidia/pytorch:24.05-py3\n", path=".github/workflows/gpu.yml"),
        Invalid("image: nvidia/cuda:12.1.0-devel-ubuntu22.04\ntest:\n  script: [pytest]\n", path=".gitlab-ci.yml"),
        Invalid("services:\n  t:\n    build:\n      args:\n        BASE_IMAGE: nvcr.io/nvidia/pytorch:24.02-py3\n", path="docker-compose.yml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            if not any(isinstance(p, str) and ("image" in p.lower() or p == "container") for p in s.path):
                continue
            if not cuda_image(s.value):
                continue
            out.append(TextReport(
                s.start, s.end, f"`{s.value.strip()}` is a CUDA container image",
                guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.MEDIUM,
            ))
        return out
