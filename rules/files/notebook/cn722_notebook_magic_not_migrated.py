"""CN722: notebook magics the notebook handler does not migrate."""

from __future__ import annotations

from cuda2neuron.core import CellReport, Invalid, NotebookProblems, Rule, Valid

from ._helpers import notebook

__all__ = ["NotebookMagicNotMigrated"]


class NotebookMagicNotMigrated(Rule):
    """
    ## What it does
    Reports CUDA code inside IPython magics, which cannot be rewritten. That is line magics
    with code (``%timeit x.cuda()``, ``%time y = torch.cuda.synchronize()``), arguments of
    ``%%timeit`` cells, and cells in other languages (``%%writefile kernel.cu``, ``%%html``)
    that mention CUDA.

    ## Why is this bad?
    Magic lines are masked before the cell is parsed, so the code in them is not migrated and
    would still call CUDA on Trainium.

    ## Example
    ```python
    %timeit model(x.cuda())
    ```
    Move the statement out of the magic (``x = x.to("neuron")`` then ``%timeit model(x)``) or
    edit it by hand.

    ## Fix safety
    Report only.
    """

    code = "CN722"
    name = "notebook-magic-not-migrated"
    file_kinds = frozenset({"notebook"})
    triggers = ("cuda", "CUDA")
    VALID = (
        Valid(notebook("%matplotlib inline\nimport torch\n"), path="example.ipynb"),
        Valid(notebook("%%time\nx = 1\n"), path="example.ipynb"),
    )
    INVALID = (
        Invalid(notebook("%timeit model(x.cuda())\n"), path="example.ipynb"),
        Invalid(notebook("%%writefile kernel.cu\n__global__ void k() {}  // CUDA\n"), path="example.ipynb"),
        Invalid(notebook("%%timeit x = torch.ones(3).cuda()\nx + 1\n"), path="example.ipynb"),
    )

    @classmethod
    def check_cells(cls, problems: NotebookProblems) -> list[CellReport]:
        return [
            CellReport(p.cell, p.line, p.detail, "move the statement out of the magic (or edit it by hand) so it can be migrated")
            for p in problems.in_magics
        ]


