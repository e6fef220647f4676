"""CN901: a ``# cuda2neuron: ignore[...]`` comment that suppresses nothing."""

from __future__ import annotations

from cuda2neuron.core import Invalid, Rule, Safety, Valid

__all__ = ["UnusedSuppression"]


class UnusedSuppression(Rule):
    """
    ## What it does
    Reports a suppression comment that hides no finding on its line, and the codes in one that
    hide nothing: ``# cuda2neuron: ignore[CN101]`` (or a bare ``# cuda2neuron: ignore``) where
    no rule fires, ``ignore[CN101, CN102]`` where only CN101 does.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line: the code it was written for
    was ported or changed, and a new CUDA-ism there would pass unseen. Whether a comment is
    used is judged with every rule, whatever ``--select`` says, so a narrow run never calls a
    needed comment unused. A code that names no rule at all (a typo: ``ignore[CN1O1]``)
    silences nothing either: it is reported here, and the rest of the file is checked and
    migrated as usual (ruff warns about an unknown ``noqa`` code and goes on).

    ## Example
    ```python
    x = torch.zeros(3)  # cuda2neuron: ignore[CN101]
    ```
    becomes
    ```python
    x = torch.zeros(3)
    ```

    ## Fix safety
    A family (``ignore[CN1, CN2]``) in a comment that hides something is kept: it says "no rule
    of these families here" and is written where either may fire.

    Safe: the comment hides nothing, so removing it changes no result and no behaviour. An
    explanation after the codes is kept as a plain comment; a comment on a line of its own is
    removed with its line; only the unused codes are dropped from a comment that also hides
    something. A comment that names CN901 itself is left as it is.

    Display-only for an unknown code: the comment without it is suggested, never written
    (which code was meant is for a person to say).

    Runs on Python, launch scripts, dependency lists, YAML configs and Dockerfiles (in Python,
    only real comments count: not the text of a string). The kinds layer runs it after the
    other rules (it needs their findings), so it is no engine's visitor.
    """

    code = "CN901"
    name = "unused-suppression"
    advisory = True  # a comment: never holds back a group of linked fixes
    triggers = ("cuda2neuron:",)
    # Checked by cuda2neuron.kinds after every kind's rules, not by an engine.
    file_kinds = frozenset()
    fixes = frozenset({Safety.SAFE, Safety.DISPLAY_ONLY})
    VALID = (
        "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN101]\n",
        "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN1]\n",
        "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore\n",
        'doc = "write # cuda2neuron: ignore[CN101] to silence it"\n',
        "x = 1  # cuda2neuron: ignore[CN901]\n",
        "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN1,CN2] fast path\n",
        Valid("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py  # cuda2neuron: ignore[CN7]\n", path="launch.sh"),
    )
    INVALID = (
        Invalid("x = torch.zeros(3)  # cuda2neuron: ignore[CN101]\n", "x = torch.zeros(3)\n"),
        Invalid("x = 1  # cuda2neuron: ignore\n", "x = 1\n"),
        Invalid(
            "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN101, CN102]\n",
            "import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN101]\n",
        ),
        Invalid("# cuda2neuron: ignore[CN101]\nx = 1\n", "x = 1\n"),
        Invalid("x = 1  # cuda2neuron: ignore[CN101] kept for the old loader\n", "x = 1  # kept for the old loader\n"),
        Invalid("echo done  # cuda2neuron: ignore[CN701]\n", "echo done\n", path="launch.sh"),
        Invalid("numpy>=1.24  # cuda2neuron: ignore[CN711]\n", "numpy>=1.24\n", path="requirements.txt"),
        # An unknown code (a typo) is reported and left for a person; the file goes on.
        Invalid("import torch\nx = torch.zeros(3).cuda()  # cuda2neuron: ignore[CN1O1]\n"),
    )

    @classmethod
    def check_text(cls, doc, settings):  # noqa: ANN001, ARG003 - the text-rule protocol
        return []
