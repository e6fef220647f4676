"""CN723: a notebook whose metadata asks Colab or Kaggle for a GPU runtime."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, Rule, TextReport, Valid

from ..._shared.library_settings import match_setting, normalize_key, setting_keys, table_markdown, with_table
from ._helpers import notebook

__all__ = ["NotebookGpuRuntime"]


def _with_metadata(**metadata) -> str:
    """An example notebook (one code cell) with ``metadata`` in its top-level metadata."""
    return notebook("import torch\n", metadata=metadata)


class NotebookGpuRuntime(Rule):
    """
    ## What it does
    Reports a notebook whose metadata asks Colab or Kaggle for a GPU runtime.

    The notebook's top-level ``metadata`` is read for the rows of
    ``rules/_shared/library_settings.toml`` read in notebooks: Colab's ``"accelerator": "GPU"``
    (the runtime type Colab opens the notebook on) and Kaggle's ``"kaggle": {"accelerator":
    "nvidiaTeslaT4", "isGpuEnabled": true}``. The finding sits on the line of the key; a Kaggle
    block that says it twice (``accelerator`` and ``isGpuEnabled``) is reported once.

    ## Why is this bad?
    The port runs on Trainium, which neither Colab nor Kaggle offers: opened there, the ported
    notebook gets an NVIDIA GPU runtime and no ``neuron`` device, and fails at its first
    ``.to("neuron")``. Nothing in the code cells says so.

    ## Example
    ```json
    "metadata": {
      "accelerator": "GPU",
      "colab": {"gpuType": "T4"}
    }
    ```
    Run the ported notebook on a Trainium instance (Jupyter on an EC2 trn2 instance with the
    Neuron SDK, or Amazon SageMaker); the key can stay for the GPU original.

    ## Fix safety
    Report only: where the notebook runs is the user's choice, not the file's.
    """

    code = "CN723"
    name = "notebook-gpu-runtime"
    file_kinds = frozenset({"notebook"})
    triggers = ("accelerator", "isGpuEnabled")
    triggers_as_keys = True
    VALID = (
        Valid(notebook("import torch\n"), path="example.ipynb"),
        Valid(_with_metadata(accelerator="TPU"), path="example.ipynb"),
        Valid(_with_metadata(kaggle={"accelerator": "none", "isGpuEnabled": False}), path="example.ipynb"),
        # an accelerator key inside a cell's source is code, not the notebook's runtime
        Valid(notebook('cfg = {"accelerator": "GPU"}\n'), path="example.ipynb"),
    )
    INVALID = (
        Invalid(_with_metadata(accelerator="GPU", colab={"gpuType": "T4"}), path="example.ipynb"),
        Invalid(_with_metadata(kaggle={"accelerator": "nvidiaTeslaT4", "isGpuEnabled": True}), path="example.ipynb"),
        Invalid(_with_metadata(kaggle={"isGpuEnabled": True}), path="example.ipynb"),
    )

    @classmethod
    def check_metadata(cls, doc) -> list[TextReport]:
        """Reports on ``doc``, the notebook's ``metadata`` object read as a JSON config (offsets
        into that object's text)."""
        keys = setting_keys("notebook")
        out: list[TextReport] = []
        owners: set[tuple] = set()  # Kaggle's block says it twice: once is enough
        for s in doc.entries:
            if normalize_key(s.key) not in keys:
                continue
            found = match_setting(s.key, s.value, "notebook", doc.path)
            if found is None or s.path[:-1] in owners:
                continue
            owners.add(s.path[:-1])
            out.append(TextReport(
                s.key_start if s.key_start >= 0 else s.start, s.end,
                f"`\"{s.key}\": {doc.raw[s.start:s.end]}` in the notebook's metadata {found.what}",
                guidance=found.setting.guidance, effort=Effort.LOW,
            ))
        return out


# The table's rows and their sources belong to the rule's documentation (docs/rules.md, `cuda2neuron rules`).
NotebookGpuRuntime.__doc__ = with_table(NotebookGpuRuntime.__doc__ or "", "notebook")
NotebookGpuRuntime.reference = table_markdown("notebook")
