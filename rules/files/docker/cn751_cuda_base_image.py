"""CN751: Dockerfiles built on CUDA base images (their RUN / ENV lines go to the shell rules)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, Valid
from cuda2neuron.core import TextReport

from .._helpers import TextRule

__all__ = ["CudaBaseImage"]

_DOCKERFILE = "Dockerfile"
# `FROM [--platform=...] image[:tag] [AS name]`: the image reference.
_IMAGE_RE = re.compile(r"(?:--\S+[ \t]+)*(\S+)")
# NVIDIA's CUDA images and NGC containers, and tags that name a CUDA or cuDNN build
# (pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime, ...:cu121).
_CUDA_IMAGE_RE = re.compile(r"nvidia/cuda|nvcr\.io/nvidia/|[:\-_.]cuda[\d.-]|cudnn|[:\-_.]cu1\d{2}\b", re.IGNORECASE)


class CudaBaseImage(TextRule):
    """
    ## What it does
    Reports ``FROM`` lines of Dockerfiles whose base image is a CUDA image: ``nvidia/cuda``,
    NGC containers (``nvcr.io/nvidia/...``) and tags naming a CUDA or cuDNN build
    (``pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime``). The file's ``RUN`` / ``ENV`` lines are
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
    )
    INVALID = (
        Invalid("FROM nvidia/cuda:12.1.0-cudnn8-runtime-ubuntu22.04\n", path=_DOCKERFILE),
        Invalid("FROM --platform=linux/amd64 pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime AS train\n", path=_DOCKERFILE),
        Invalid("from nvcr.io/nvidia/pytorch:24.05-py3\n", path="train.Dockerfile"),
    )

    @classmethod
    def check_text(cls, doc, settings):
        reports = []
        for start, end in doc.instructions("FROM"):
            m = _IMAGE_RE.match(doc.raw, start, end)
            if m is None or not _CUDA_IMAGE_RE.search(m.group(1)):
                continue
            reports.append(TextReport(
                m.start(1), m.end(1),
                f"`{m.group(1)}` is a CUDA base image",
                guidance="build on an image that ships the AWS Neuron SDK (Neuron driver and runtime, TorchNeuron) "
                "instead, and drop the layers that install the CUDA toolkit",
                effort=Effort.MEDIUM,
            ))
        return reports
