"""CN763: CUDA container images named in compose, Kubernetes and CI files."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import NEURON_IMAGE_GUIDANCE, TextRule, cuda_image
from ._helpers import INFRA_KINDS

__all__ = ["CudaContainerImage"]

# Build arguments written as `NAME=value` lines: docker/build-push-action's `build-args: |` block and a
# compose `build: args:` list. The value is no image reference as a whole, so each line is read; a
# value counts when it has a repository path or a tag (nvidia/cuda, pytorch/pytorch:2.3.0-cuda12.1):
# `IMAGE_TAG=trainer-without-cuda-extras` spells like an image but names none.
_BUILD_ARG_KEYS = frozenset({"build-args", "build_args", "buildargs"})
_BUILD_ARG_RE = re.compile(r"^[ \t]*-?[ \t]*([A-Za-z_]\w*)=[\"']?([^\s\"']+)", re.MULTILINE)
# A build argument that picks the image's CUDA build by its name (axolotl's base.yml hands the CI
# matrix on: `CUDA_VERSION=${{ matrix.cuda_version }}`, `CUDNN_VERSION=...`, `TORCH_CUDA_ARCH_LIST=...`):
# the Dockerfile reads it in `FROM nvidia/cuda:${CUDA_VERSION}-...` or its toolkit install. A value that
# turns CUDA off (`USE_CUDA=0`) builds none.
_CUDA_ARG_NAME = re.compile(r"(?:^|_)(?:CUDA|CUDNN|NCCL)(?:_|$)", re.IGNORECASE)
_OFF = re.compile(r"(?:0|false|no|off|none|cpu|)", re.IGNORECASE)


class CudaContainerImage(TextRule):
    """
    ## What it does
    Reports CUDA container images named in YAML and JSON files: a compose service's or a
    Kubernetes container's ``image:``, a GitHub Actions job's ``container:`` (``image:``),
    a GitLab CI ``image:`` (``name:``), build arguments such as ``BASE_IMAGE:`` — any value under
    a key that names an image and that is a CUDA image (``nvidia/cuda``, NGC's
    ``nvcr.io/nvidia/...``, tags naming a CUDA or cuDNN build:
    ``pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel``), and the ``NAME=<image>`` lines of
    docker/build-push-action's ``build-args: |`` and of a compose ``build: args:`` list; in those,
    also a build argument whose name picks the CUDA build (``CUDA_VERSION=${{ matrix.cuda_version }}``,
    ``CUDNN_VERSION``, ``TORCH_CUDA_ARCH_LIST``), one finding a line.

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
    triggers = ("cuda", "nvidia", "cudnn", "cu1", "CUDA", "CUDNN", "NCCL")
    VALID = (
        Valid("services:\n  t:\n    image: python:3.11-slim\n", path="docker-compose.yml"),
        Valid("description: runs on the cuda image\n", path="config/train.yaml"),
        Valid("# image: nvidia/cuda:12.1.0-base\n", path="docker-compose.yml"),
        Valid(
            "jobs:\n  b:\n    steps:\n      - uses: docker/build-push-action@v5\n        with:\n          build-args: |\n"
            "            BASE_IMAGE=python:3.11-slim\n            IMAGE_TAG=built-without-cuda\n",
            path=".github/workflows/docker.yml",
        ),
        Valid("services:\n  t:\n    build:\n      args:\n        - USE_CUDA=0\n", path="docker-compose.yml"),
        # axolotl's CI matrix: a tag that names the variant *without* CUDA selects no CUDA image.
        Valid(
            "jobs:\n  b:\n    strategy:\n      matrix:\n        include:\n          - IMAGE_TAG: trainer-without-cuda-extras\n"
            "          - base_image: ghcr.io/org/trainer:cuda-disabled\n",
            path=".github/workflows/docker.yml",
        ),
    )
    INVALID = (
        Invalid("jobs:\n  t:\n    container:\n      image: pytorch/pytorch:2.8.0-cuda12.8-cudnn9-devel\n", path=".github/workflows/gpu.yml"),
        Invalid("jobs:\n  t:\n    container: nvcr.io/nvidia/pytorch:24.05-py3\n", path=".github/workflows/gpu.yml"),
        Invalid("image: nvidia/cuda:12.1.0-devel-ubuntu22.04\ntest:\n  script: [pytest]\n", path=".gitlab-ci.yml"),
        Invalid("services:\n  t:\n    build:\n      args:\n        BASE_IMAGE: nvcr.io/nvidia/pytorch:24.02-py3\n", path="docker-compose.yml"),
        Invalid(
            "jobs:\n  b:\n    steps:\n      - uses: docker/build-push-action@v5\n        with:\n          build-args: |\n"
            "            PYTHON=3.11\n            BASE_IMAGE=nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04\n",
            path=".github/workflows/docker.yml",
        ),
        # the CI matrix handed to the Dockerfile's CUDA base image (axolotl's base.yml)
        Invalid(
            "jobs:\n  b:\n    steps:\n      - uses: docker/build-push-action@v6\n        with:\n          build-args: |\n"
            "            CUDA_VERSION=${{ matrix.cuda_version }}\n            PYTHON_VERSION=${{ matrix.python }}\n"
            "            TORCH_CUDA_ARCH_LIST=${{ matrix.arch }}\n",
            path=".github/workflows/base.yml",
        ),
        Invalid("services:\n  t:\n    build:\n      args:\n        CUDA_VERSION: 12.4.1\n", path="docker-compose.yml"),
        Invalid("services:\n  t:\n    build:\n      args:\n        - BASE_IMAGE=nvidia/cuda:12.1.0-devel-ubuntu22.04\n", path="compose.yaml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            if _build_args(s):
                out.extend(_build_arg_images(doc, s))
                continue
            if _compose_build_arg(s) and _CUDA_ARG_NAME.search(s.key) and not _OFF.fullmatch(s.value.strip()):
                out.append(_cuda_build_arg(s.key_start, s.end, s.key))
                continue
            if not any(isinstance(p, str) and ("image" in p.lower() or p == "container") for p in s.path):
                continue
            if not cuda_image(s.value):
                continue
            out.append(TextReport(
                s.start, s.end, f"`{s.value.strip()}` is a CUDA container image",
                guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.MEDIUM,
            ))
        return out


def _build_args(s) -> bool:  # noqa: ANN001 - a documents.structured.Scalar
    """A value of docker/build-push-action's ``build-args`` or an item of a compose ``build: args:`` list."""
    owner = s.owner
    return owner in _BUILD_ARG_KEYS or (owner == "args" and "build" in s.path and isinstance(s.path[-1], int))


def _compose_build_arg(s) -> bool:  # noqa: ANN001
    """A compose ``build: args:`` mapping entry (``CUDA_VERSION: 12.4.1``)."""
    return len(s.path) >= 3 and s.path[-2] == "args" and "build" in s.path and s.key is not None and s.key_start >= 0


def _cuda_build_arg(start: int, end: int, name: str) -> TextReport:
    return TextReport(
        start, end, f"the build argument `{name}` picks the CUDA build of the image it builds",
        guidance=NEURON_IMAGE_GUIDANCE + "; the CUDA build arguments then go", effort=Effort.MEDIUM,
    )


def _build_arg_images(doc, s) -> list[TextReport]:  # noqa: ANN001
    """Each ``NAME=<CUDA image>`` line of the value, reported at the image, and each line whose
    name picks the CUDA build (one finding a line)."""
    out = []
    # The value as written: a block scalar's lines keep their place in the file (its value does not).
    text = doc.raw[s.start:s.end]
    for m in _BUILD_ARG_RE.finditer(text):
        name, image = m.group(1), m.group(2)
        if ("/" in image or ":" in image) and cuda_image(image):
            start = s.start + m.start(2)
            out.append(TextReport(
                start, start + len(image), f"`{image}` is a CUDA container image (a build argument)",
                guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.MEDIUM,
            ))
        elif _CUDA_ARG_NAME.search(name) and not _OFF.fullmatch(image):
            out.append(_cuda_build_arg(s.start + m.start(1), s.start + m.end(2), name))
    return out
