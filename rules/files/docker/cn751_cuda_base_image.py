"""CN751: Dockerfiles built on CUDA base images (their RUN / ENV lines go to the shell rules)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Valid
from cuda2neuron.core import TextReport

from .._helpers import NEURON_IMAGE_GUIDANCE, TextRule, cuda_image, names_cuda

__all__ = ["CudaBaseImage"]

_DOCKERFILE = "Dockerfile"
# `FROM [--platform=...] image[:tag] [AS name]`: the image reference.
_IMAGE_RE = re.compile(r"(?:--\S+[ \t]+)*(\S+)")
# `ARG BASE_IMAGE=...`, `ENV BASE=...`, `LABEL org.opencontainers.image.base.name="..."`: a value
# that is an image reference (the image a later FROM ${BASE_IMAGE} builds on, or records).
_VALUE_RE = re.compile(r"""[^\s"'=]+""")


class CudaBaseImage(TextRule):
    """
    ## What it does
    Reports ``FROM`` lines of Dockerfiles whose base image is a CUDA image: ``nvidia/cuda``,
    NGC containers (``nvcr.io/nvidia/...``) and tags naming a CUDA or cuDNN build
    (``pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime``), and ``ARG`` / ``ENV`` / ``LABEL``
    values naming one (``ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.02-py3`` for a later
    ``FROM ${BASE_IMAGE}``, ``LABEL org.opencontainers.image.base.name=...``). Apptainer /
    Singularity definition files are read too: their ``From:`` header is the base image. The file's ``RUN`` / ``ENV`` lines are
    read by the launch-script rules (CN701–CN705, CN713): ``CUDA_VISIBLE_DEVICES``, ``NCCL_*``,
    CUDA wheel indexes and CUDA-only packages.

    ## Why is this bad?
    A CUDA image carries the CUDA toolkit and a CUDA build of PyTorch; a Trainium instance needs
    the Neuron driver, runtime and TorchNeuron instead, so the ported code cannot run in it.

    ## Example
    ```dockerfile
    FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04
    ```
    is reported: build on an image that ships the AWS Neuron SDK instead.

    ## Fix safety
    Report only: the replacement image, and the layers the CUDA image provided, are a choice
    for the project.
    """

    code = "CN751"
    name = "cuda-base-image"
    file_kinds = frozenset({"dockerfile"})
    triggers = ("cuda", "nvidia", "cu1")
    VALID = (
        Valid("FROM python:3.11-slim\nRUN pip install torch\n", path=_DOCKERFILE),
        Valid("# FROM nvidia/cuda:12.1.0-runtime\nFROM ubuntu:22.04\n", path=_DOCKERFILE),
        Valid("FROM ubuntu:22.04\nLABEL note=cuda-free\n", path=_DOCKERFILE),
        Valid('FROM ubuntu:22.04\nLABEL description="built without cuda"\n', path=_DOCKERFILE),
        # variables named after CUDA, holding a version: their names are not images
        Valid('ARG CUDNN_VERSION=""\nARG CUDA_VERSION_TAG\nFROM ubuntu:22.04\nLABEL note=cuda-free\n', path=_DOCKERFILE),
        # a tag naming the variant without CUDA
        Valid("FROM ghcr.io/org/trainer:py3.11-no-cuda\n", path=_DOCKERFILE),
    )
    INVALID = (
        Invalid("FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04\n", path=_DOCKERFILE),
        Invalid("FROM --platform=linux/amd64 pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime AS train\n", path=_DOCKERFILE),
        Invalid("from nvcr.io/nvidia/pytorch:24.05-py3\n", path="train.Dockerfile"),
        Invalid("ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:24.02-py3\nFROM ${BASE_IMAGE}\n", path=_DOCKERFILE),
        Invalid('LABEL org.opencontainers.image.base.name="nvidia/cuda:12.1.0-base"\n', path=_DOCKERFILE),
        Invalid("Bootstrap: docker\nFrom: nvcr.io/nvidia/pytorch:24.02-py3\n%post\n    pip install -e .\n", path="Singularity"),
        Invalid("Bootstrap: docker\nFrom: ubuntu:22.04\n%labels\n    base.name nvcr.io/nvidia/pytorch:24.02-py3\n", path="Singularity"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        reports = []
        for start, end in doc.instructions("FROM"):
            m = _IMAGE_RE.match(doc.raw, start, end)
            if m is None or not names_cuda(m.group(1)):
                continue
            reports.append(TextReport(
                m.start(1), m.end(1),
                f"`{m.group(1)}` is a CUDA base image",
                guidance="build on " + NEURON_IMAGE_GUIDANCE.removeprefix("use "),
                effort=Effort.MEDIUM,
            ))
        for keyword in ("ARG", "ENV", "LABEL"):
            for start, end in doc.instructions(keyword):
                for i, m in enumerate(_VALUE_RE.finditer(doc.raw, start, end)):
                    value = m.group(0)
                    # A variable's name is not its value: `ARG CUDNN_VERSION=""`, `ENV CUDA_HOME /usr`
                    # (the first word of the `KEY value` form) name no image.
                    if doc.raw[m.end():m.end() + 1] == "=" or (i == 0 and "=" not in doc.raw[start:end]):
                        continue
                    if not cuda_image(value):
                        continue
                    reports.append(TextReport(
                        m.start(), m.end(),
                        f"`{value}` names a CUDA image",
                        guidance=NEURON_IMAGE_GUIDANCE,
                        effort=Effort.LOW,
                    ))
        return reports
