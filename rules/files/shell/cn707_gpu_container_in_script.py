"""CN707: containers started or pulled for NVIDIA GPUs in scripts (docker, podman, apptainer)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid
from cuda2neuron.documents.dockerfile import Dockerfile
from cuda2neuron.documents.shell import ShellScript, unquote, word_end

from .._helpers import NEURON_IMAGE_GUIDANCE, TextRule, cuda_image

__all__ = ["GpuContainerInScript"]


# `docker run ...`, `podman create ...`, `docker pull IMAGE`, `enroot import docker://IMAGE`.
_CONTAINER_RE = re.compile(
    r"(?<![\w./-])(?:docker|podman|nerdctl|nvidia-docker|sudo[ \t]+docker)[ \t]+(run|create|pull|build|buildx[ \t]+build)(?![\w-])"
)
_NVIDIA_DOCKER_RE = re.compile(r"(?<![\w./-])nvidia-docker(?![\w-])")
_GPU_OPTION_RE = re.compile(r"(?<![\w-])(--gpus|--runtime)(?:[ \t]*=[ \t]*|[ \t]+)(\S+)")
# Apptainer / Singularity's `--nv` binds the host's NVIDIA driver into the container.
_NV_RE = re.compile(r"(?<![\w./-])(?:singularity|apptainer)[ \t]+(?:exec|run|shell|instance[ \t]+start)\b[^\n]*?(?<![\w-])(--nv)(?![\w-])")
_IMAGE_ARG_RE = re.compile(r"(?:docker://)?([\w.-]+(?::\d+)?(?:/[\w.-]+)+(?::[\w.-]+)?|[\w.-]+:[\w.-]+)")
_ANY_NAME_RE = re.compile(r"[A-Za-z_]\w*")
_IMAGE_OPTION_RE = re.compile(r"(?<![\w-])(--[\w-]*image)(?:[ \t]*=[ \t]*|[ \t]+)(\S+)")
_DEVICE_GUIDANCE = (
    "give the container the Neuron devices instead (`--device=/dev/neuron0`, one per device) and run "
    "an image with the Neuron SDK"
)


class GpuContainerInScript(TextRule):
    """
    ## What it does
    Reports containers set up for NVIDIA GPUs in scripts: ``docker run --gpus all``,
    ``--runtime=nvidia``, ``nvidia-docker``, Apptainer / Singularity's ``--nv``, and
    ``docker pull`` / ``run`` / ``create`` of a CUDA image (``nvcr.io/nvidia/pytorch:24.02-py3``,
    tags naming a CUDA or cuDNN build), and variables or launcher options set to such an image
    (``IMAGE=nvcr.io/nvidia/jax:25.10-py3``, ``--beaker-image``, ``--image``) — the provisioning scripts a Dockerfile's ``FROM``
    rule (CN751) does not see.

    ## Why is this bad?
    ``--gpus`` and the NVIDIA runtime hand the container NVIDIA devices and drivers, which a
    Trainium host does not have; a CUDA image carries a CUDA build of PyTorch that cannot drive
    NeuronCores. The container starts without its accelerator, or not at all.

    ## Example
    ```bash
    docker run --gpus all -it nvcr.io/nvidia/pytorch:24.02-py3 python train.py
    ```
    is reported twice: pass the Neuron devices (``--device=/dev/neuron0``) and use an image with
    the AWS Neuron SDK.

    ## Fix safety
    Report only: the number of Neuron devices and the image are the project's choice.
    """

    code = "CN707"
    name = "gpu-container-in-script"
    file_kinds = frozenset({"shell"})
    triggers = ("docker", "podman", "nerdctl", "--nv", "singularity", "apptainer", "nvcr.io", "nvidia/cuda", "-image")
    VALID = (
        Valid("docker run --device=/dev/neuron0 my-neuron-image python train.py\n", path="run.sh"),
        Valid("docker pull python:3.11-slim\n", path="setup.sh"),
        Valid("# docker run --gpus all nvcr.io/nvidia/pytorch:24.02-py3\n", path="run.sh"),
        Valid("apptainer exec --nvccli-off img.sif python x.py\n", path="run.sh"),
        # a Dockerfile's ARG / ENV image is CN751's (xtuner's `ARG BASE_IMAGE=nvcr.io/...` was reported twice)
        Valid("ARG BASE_IMAGE=nvcr.io/nvidia/pytorch:25.03-py3\nFROM ${BASE_IMAGE}\n", path="Dockerfile"),
    )
    INVALID = (
        Invalid("docker run --gpus all -it --rm nvcr.io/nvidia/pytorch:24.02-py3 python train.py\n", path="run.sh"),
        Invalid("docker pull nvcr.io/nvidia/pytorch:24.02-py3\n", path="setup.sh"),
        Invalid("docker run --runtime=nvidia -v $PWD:/w my-image\n", path="run.sh"),
        Invalid("nvidia-docker run -it my-image bash\n", path="run.sh"),
        Invalid("singularity exec --nv gpt-neox.sif python train.py\n", path="job.slurm"),
        Invalid('JAX_IMAGE="nvcr.io/nvidia/jax:25.10-py3"\nkind load docker-image "$JAX_IMAGE"\n', path="ci.sh"),
        Invalid("gantry run --beaker-image michalg/cuda11.8-ubuntu20.04-arb -- python train.py\n", path="launch.sh"),
    )

    @classmethod
    def check_text(cls, doc: ShellScript, settings) -> list[TextReport]:
        text = doc.text
        out: list[TextReport] = []
        for m in doc.code_matches(_NVIDIA_DOCKER_RE):
            out.append(TextReport(
                m.start(), m.end(), "`nvidia-docker` starts containers with NVIDIA GPUs",
                guidance=f"use plain `docker run`; {_DEVICE_GUIDANCE}", effort=Effort.LOW,
            ))
        for m in doc.code_matches(_CONTAINER_RE):
            _, line_end = doc.line_bounds(m.start())
            end = _command_end(text, m.end(), line_end)
            for opt in _GPU_OPTION_RE.finditer(text, m.end(), end):
                value = unquote(opt.group(2)) or opt.group(2)
                if opt.group(1) == "--runtime" and value != "nvidia":
                    continue
                out.append(TextReport(
                    opt.start(), opt.end(), f"`{opt.group(0)}` gives the container NVIDIA GPUs",
                    guidance=_DEVICE_GUIDANCE, effort=Effort.LOW,
                ))
            for arg in re.finditer(r"\S+", text[m.end():end]):
                a, b = m.end() + arg.start(), m.end() + arg.end()
                word = text[a:word_end(text, a)] if text[a] in "'\"" else text[a:b]
                ref = _IMAGE_ARG_RE.fullmatch(unquote(word) or "")
                if ref is None or not doc.is_code(a) or not cuda_image(ref.group(1)):
                    continue
                out.append(TextReport(
                    a, a + len(word), f"`{ref.group(1)}` is a CUDA image",
                    guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.MEDIUM,
                ))
                break  # the image: what follows is the command run in it
        # `JAX_IMAGE="nvcr.io/nvidia/jax:25.10-py3"`, then `docker pull "$JAX_IMAGE"`: the image is
        # named where it is assigned. A Dockerfile's `ARG` / `ENV` value is CN751's (it reads the
        # instruction itself): reported here too, the same line had two findings.
        declared = _declarations(doc)
        for ns, ne, vs, ve in doc.assignments(_ANY_NAME_RE):
            if any(a <= ns < b for a, b in declared):
                continue
            value = unquote(text[vs:ve])
            if value is None or not cuda_image(value.removeprefix("docker://")):
                continue
            out.append(TextReport(
                vs, ve, f"`{text[ns:ne]}` names a CUDA image (`{value}`)",
                guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.LOW,
            ))
        # `beaker session create --image X`, `--beaker-image X`, `--docker-image=X`: an image option
        # of any launcher.
        for m in doc.code_matches(_IMAGE_OPTION_RE):
            value = unquote(m.group(2)) or ""
            if cuda_image(value.removeprefix("docker://")):
                out.append(TextReport(
                    m.start(2), m.end(2), f"`{m.group(1)}` names a CUDA image (`{value}`)",
                    guidance=NEURON_IMAGE_GUIDANCE, effort=Effort.LOW,
                ))
        for m in doc.code_matches(_NV_RE):
            out.append(TextReport(
                m.start(1), m.end(1), "`--nv` binds the host's NVIDIA driver and GPUs into the container",
                guidance="drop `--nv` and bind the Neuron devices instead (`--bind /dev/neuron0`), with an image "
                "that has the Neuron SDK",
                effort=Effort.LOW,
            ))
        return out


def _declarations(doc: ShellScript) -> list[tuple[int, int]]:
    """Where a Dockerfile's ``ARG`` and ``ENV`` instructions are written (none in a script)."""
    if not isinstance(doc, Dockerfile):
        return []
    return [span for keyword in ("ARG", "ENV") for span in doc.instructions(keyword)]


def _command_end(text: str, start: int, line_end: int) -> int:
    """The end of a command that may continue over ``\\``-ended lines."""
    end = line_end
    while text[start:end].rstrip(" \t\r").endswith("\\") and end < len(text):
        nxt = text.find("\n", end + 1)
        end = len(text) if nxt == -1 else nxt
    return end
