"""CN721–CN722: what the notebook handler cannot migrate in a Jupyter notebook.

Code cells themselves are migrated by the whole Python catalog and ``!`` / ``%%bash`` lines by
the shell rules (CN70x); these two rules report what is left behind.
"""

from __future__ import annotations

import json

from cuda2neuron.core import CellReport, Invalid, NotebookProblems, Rule, Valid

__all__ = ["NotebookCellNotParsed", "NotebookMagicNotMigrated"]

_NOTEBOOK = frozenset({"notebook"})


def _nb(*cells: str) -> str:
    """A minimal nbformat-4 notebook with one code cell per argument, as Jupyter writes it."""
    return (
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                     "outputs": [], "source": src.splitlines(keepends=True)}
                    for i, src in enumerate(cells)
                ],
                "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
            sort_keys=True,
            ensure_ascii=False,
        )
        + "\n"
    )


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
    file_kinds = _NOTEBOOK
    # The handler parses the cells (and so finds a broken one) only when the notebook mentions
    # CUDA in any case, or a word of a Python rule, which the notebook's prefilter holds too.
    triggers = ("cuda", "CUDA")
    reads_unparsed_cells = True
    VALID = (
        Valid(_nb("%pip install numpy\nimport torch\n"), path="example.ipynb"),
        Valid(_nb("for i in range(2):\n    !echo $i\n"), path="example.ipynb"),
    )
    INVALID = (
        Invalid(_nb("import torch\n", "pip install flash-attn\nx.cuda()\n"), path="example.ipynb"),
        Invalid(_nb("x = torch.zeros(3).cuda(\n"), path="example.ipynb"),
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
    file_kinds = _NOTEBOOK
    triggers = ("cuda", "CUDA")
    VALID = (
        Valid(_nb("%matplotlib inline\nimport torch\n"), path="example.ipynb"),
        Valid(_nb("%%time\nx = 1\n"), path="example.ipynb"),
    )
    INVALID = (
        Invalid(_nb("%timeit model(x.cuda())\n"), path="example.ipynb"),
        Invalid(_nb("%%writefile kernel.cu\n__global__ void k() {}  // CUDA\n"), path="example.ipynb"),
        Invalid(_nb("%%timeit x = torch.ones(3).cuda()\nx + 1\n"), path="example.ipynb"),
    )

    @classmethod
    def check_cells(cls, problems: NotebookProblems) -> list[CellReport]:
        return [
            CellReport(p.cell, p.line, p.detail, "move the statement out of the magic (or edit it by hand) so it can be migrated")
            for p in problems.in_magics
        ]
