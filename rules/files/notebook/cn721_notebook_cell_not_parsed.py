"""CN721: notebook code cells the Python catalog could not parse.

Code cells themselves are migrated by the whole Python catalog and ``!`` / ``%%bash`` lines by
the shell rules (CN70x); this rule and CN722 report what is left behind.
"""

from __future__ import annotations

from cuda2neuron.core import CellReport, Invalid, NotebookProblems, Rule, Valid

from ._helpers import notebook

__all__ = ["NotebookCellNotParsed"]


class NotebookCellNotParsed(Rule):
    """
    ## What it does
    Reports notebook code cells that do not parse as Python, which are left unmigrated. Magics
    and shell lines are masked before parsing; a cell that still fails is left as it is while
    the other cells are migrated.

    ## Why is this bad?
    Whatever CUDA code the cell holds is not looked at. Usually the cell uses IPython syntax we
    do not mask (automagics such as ``pip install x`` without ``%``) or is a scratch cell with a
    syntax error.

    ## Example
    ```python
    pip install flash-attn
    model.cuda()
    ```
    Write ``%pip install flash-attn`` (or fix the syntax error) and run cuda2neuron again.

    ## Fix safety
    Report only.
    """

    code = "CN721"
    name = "notebook-cell-not-parsed"
    file_kinds = frozenset({"notebook"})
    # The handler parses the cells (and so finds a broken one) only when the notebook mentions
    # CUDA in any case, or a word of a Python rule, which the notebook's prefilter holds too.
    triggers = ("cuda", "CUDA")
    reads_unparsed_cells = True
    VALID = (
        Valid(notebook("%pip install numpy\nimport torch\n"), path="example.ipynb"),
        Valid(notebook("for i in range(2):\n    !echo $i\n"), path="example.ipynb"),
    )
    INVALID = (
        Invalid(notebook("import torch\n", "pip install flash-attn\nx.cuda()\n"), path="example.ipynb"),
        Invalid(notebook("x = torch.zeros(3).cuda(\n"), path="example.ipynb"),
    )

    @classmethod
    def check_cells(cls, problems: NotebookProblems) -> list[CellReport]:
        return [
            CellReport(
                p.cell,
                p.line,
                f"does not parse as Python ({p.detail}); the cell is not migrated",
                "fix the syntax (or the IPython construct we could not mask) and run again",
            )
            for p in problems.unparsed
        ]


