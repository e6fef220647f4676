"""CN772: NVIDIA's conda channel in environment files."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule
from ._helpers import CONDA_KINDS, is_conda_env

__all__ = ["CondaNvidiaChannel"]


class CondaNvidiaChannel(TextRule):
    """
    ## What it does
    Reports the ``nvidia`` channel (by name or URL) in a conda environment file's
    ``channels:`` list.

    ## Why is this bad?
    NVIDIA's channel serves the CUDA toolkit and its libraries: the solver pulls CUDA packages
    from it (for ``pytorch-cuda``, ``cuda-*``) that a Trainium environment does not use.

    ## Example
    ```yaml
    channels:
      - pytorch
      - nvidia
    ```
    ``nvidia`` is reported: drop it with the CUDA packages (CN771).

    ## Fix safety
    Report only: the channel goes together with the packages that need it.
    """

    code = "CN772"
    name = "conda-nvidia-channel"
    file_kinds = CONDA_KINDS
    triggers = ("nvidia",)
    VALID = (
        Valid("name: e\nchannels: [conda-forge]\ndependencies: [python]\n", path="environment.yml"),
        Valid("channels:\n  - nvidia\n", path="config/slack.yaml"),
    )
    INVALID = (
        Invalid("name: e\nchannels:\n  - pytorch\n  - nvidia\ndependencies:\n  - pytorch-cuda=12.1\n", path="environment.yml"),
        Invalid("name: e\nchannels: [https://conda.anaconda.org/nvidia]\ndependencies: [python]\n", path="environment.yml"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        out = []
        for s in doc.scalars:
            if len(s.path) != 2 or s.path[0] != "channels" or not is_conda_env(doc, s.document):
                continue
            channel = s.value.strip().rstrip("/").rsplit("/", 1)[-1].lower()
            if channel == "nvidia":
                out.append(TextReport(
                    s.start, s.end, "the `nvidia` channel serves the CUDA toolkit and its libraries",
                    guidance="drop it together with the CUDA packages (CN771)", effort=Effort.LOW,
                ))
        return out
