"""CN902: a line of code that still names CUDA and that no other finding covers (the residual pass)."""

from __future__ import annotations

from cuda2neuron.core import Invalid, Rule, Valid

__all__ = ["CudaReferenceLeft"]


class CudaReferenceLeft(Rule):
    """
    ## What it does
    After every other rule has run, reports each line of code, configuration, launch script,
    build or container file that still names CUDA — ``cuda``, ``nccl``, ``cudnn``, ``nvidia`` or
    ``nvcc`` — and that no finding covers: "CUDA reference left — review". Comments,
    docstrings and prose (a quoted message with spaces) are not code. A word that is provably
    no CUDA construct is not reported: a name the project defines (``def _require_cuda()``), a
    key of the program's own data (``state["cuda_rng_state"]``), a label (a test id, an
    option's name), the ``"cuda"`` row of a device table that also has a ``"neuron"`` row; in
    configs, the names of the program's own settings (keys other than environment variables
    and resource names).

    ## Why is this bad?
    The promise of a port is "nothing reported means nothing left". Every specific rule knows
    one CUDA construct; a use that none of them knows — an ``nvcc`` call in a provisioning
    script, a config key nobody has written a rule for — would otherwise pass silently. This
    finding makes the promise true by construction, and counts such lines apart in every
    report ("N lines still mention CUDA") so that the classes that deserve a rule of their own
    show up.

    ## Example
    ```bash
    nvcc -O3 -o fused fused.cu
    ```
    is reported: no rule knows a CUDA compiler call in a script; port the kernel (NKI) and
    drop the build step.

    ## Fix safety
    Report only (effort low): a person decides. Whether a line is covered is judged against
    the whole catalog whatever ``--select`` / ``--ignore`` / ``--target`` say and whatever a
    suppression comment hides, so ignoring a rule never turns its lines into residuals.
    Silence a reviewed line with ``# cuda2neuron: ignore[CN902]``; JSON has no comments: use
    ``per-file-ignores`` in the config. CUDA sources (``*.cu``) are reported as a whole by
    CN741; the pass does not read them. In notebooks it reads the code cells (``!`` lines and
    ``%%bash`` cells as shell) and points at the ``.ipynb`` line that holds the cell's line
    (``cell N, line M:``); there a word is excused only by being in a comment or prose.

    Run by the kinds layer after the other rules (it needs their findings), like CN901.
    """

    code = "CN902"
    name = "cuda-reference-left"
    # The pass's own words (kinds/_residual.py); every kind it reads has them as coarse words.
    triggers = ("cuda", "nccl", "cudnn", "nvidia", "nvcc")
    # Run by cuda2neuron.kinds after every kind's rules, not by an engine.
    file_kinds = frozenset()
    fixes = frozenset()
    VALID = (
        # Covered by a specific rule (CN101 reports `.cuda()`).
        "import torch\nx = torch.zeros(3).cuda()\n",
        # Comments, docstrings and messages are not code.
        '"""Runs on CUDA GPUs."""\n# needs nvcc\nprint("built with nvcc 12")\n',
        # The project's own names and the keys of its own data.
        "def use_cuda_graphs(model):\n    return model\nstate = {}\nstate['cuda_rng_state'] = 1\n",
        Valid("echo 'install nvcc first'\n", path="setup.sh"),
        Valid("# nvcc -O3 fused.cu\npython train.py\n", path="run.sh"),
        # A config key is the program's own setting; its value here names no CUDA.
        Valid("use_cuda_graphs: false\n", path="config/train.yaml"),
        Valid("nvcc -O3 -o fused fused.cu  # cuda2neuron: ignore[CN902] reviewed\n", path="build.sh"),
    )
    INVALID = (
        Invalid("nvcc -O3 -o fused fused.cu\n", path="build.sh"),
        Invalid("import subprocess\nsubprocess.run(['nvcc', '--version'])\n"),
        Invalid('{"launcher": {"toolkit": "nvcc"}}\n', path="configs/build.json"),
        Invalid("build:\n  compiler: nvcc\n", path="config/build.yaml"),
    )

    @classmethod
    def check_text(cls, doc, settings):  # noqa: ANN001, ARG003 - the text-rule protocol
        return []
