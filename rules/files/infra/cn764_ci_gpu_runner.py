"""CN764: CI jobs that run on GPU runners (GitHub Actions ``runs-on``, GitLab CI ``tags``)."""

from __future__ import annotations

import re

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule
from ._helpers import INFRA_KINDS

__all__ = ["CiGpuRunner"]


_WORKFLOW = ".github/workflows/tests.yml"
# Runner labels and groups that name a GPU: the word itself, CUDA / NVIDIA, NVIDIA GPU models and
# the AWS GPU instance families (g4dn, g5, g6, p3, p4d, p5).
_GPU_LABEL_RE = re.compile(
    r"(?<![a-z0-9])(?:gpus?|cuda|nvidia|a10g?|a100|h100|h200|l4|l40s?|t4|v100|rtx\w*"
    r"|g4dn|g5g?|g6e?|p3|p3dn|p4de?|p5e?)(?![a-z0-9])|multi-?gpu|single-?gpu",
    re.IGNORECASE,
)


class CiGpuRunner(TextRule):
    """
    ## What it does
    Reports CI jobs placed on GPU machines: a GitHub Actions ``runs-on`` label, list item or
    runner ``group`` / ``labels`` that names a GPU (``gpu``, ``cuda``, ``nvidia``, a GPU model
    such as ``a100`` or ``t4``, an AWS GPU instance family such as ``g5`` or
    ``aws-g6-4xlarge-plus``), and GitLab CI ``tags:`` that do.

    ## Why is this bad?
    The ported code's tests then run on a GPU host, where ``"neuron"`` does not exist: they
    fail, or a job skips them and the port is never tested where it runs.

    ## Example
    ```yaml
    jobs:
      gpu-tests:
        runs-on: [self-hosted, multi-gpu]
    ```
    is reported: run the job on a Trainium runner (a trn1 / trn2 instance registered as a
    self-hosted runner), or run the port's CPU-side checks (``cuda2neuron validate``) on an
    ordinary runner.

    ## Fix safety
    Report only: which runners a project has is its own infrastructure.
    """

    code = "CN764"
    name = "ci-gpu-runner"
    file_kinds = INFRA_KINDS
    triggers = ("runs-on", "tags")
    VALID = (
        Valid("jobs:\n  t:\n    runs-on: ubuntu-latest\n", path=_WORKFLOW),
        Valid("jobs:\n  t:\n    runs-on: [self-hosted, trn2]\n", path=_WORKFLOW),
        Valid("build:\n  tags: [docker, linux]\n  script: [make]\n", path=".gitlab-ci.yml"),
        # Not a CI file: a project's own `tags`.
        Valid("dataset:\n  tags: [gpu, fast]\n", path="config/data.yaml"),
    )
    INVALID = (
        Invalid("jobs:\n  t:\n    runs-on: [self-hosted, multi-gpu]\n", path=_WORKFLOW),
        Invalid("jobs:\n  t:\n    runs-on:\n      group: aws-g6-4xlarge-plus\n", path=_WORKFLOW),
        Invalid("jobs:\n  t:\n    runs-on: linux.g5.4xlarge.nvidia.gpu\n", path=_WORKFLOW),
        Invalid("gpu-tests:\n  tags:\n    - nvidia-a100\n  script:\n    - pytest\n", path=".gitlab-ci.yml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            if "runs-on" in s.path[:-1] or s.key == "runs-on":
                where = "`runs-on`"
            elif s.owner == "tags" and len(s.path) == 3 and _gitlab_job(doc, s):
                where = "the job's `tags`"
            else:
                continue
            if not _GPU_LABEL_RE.search(s.value):
                continue
            out.append(TextReport(
                s.start, s.end, f"{where} `{s.value}` puts the job on a GPU runner",
                guidance="run it on a Trainium runner (a trn1 / trn2 instance registered as a self-hosted runner), "
                "or keep GPU jobs for the CUDA build and add a Trainium job for the port",
                effort=Effort.LOW,
            ))
        return out


def _gitlab_job(doc, s) -> bool:  # noqa: ANN001
    """A top-level mapping with a ``script`` (a GitLab CI job) in a ``.gitlab-ci`` file."""
    name = doc.path.replace("\\", "/").rsplit("/", 1)[-1]
    if not name.startswith(".gitlab-ci") and "/.gitlab/" not in doc.path.replace("\\", "/"):
        return False
    job = s.path[0]
    return any(k[1][:2] == (job, "script") for k in doc.keys if k[0] == s.document)
