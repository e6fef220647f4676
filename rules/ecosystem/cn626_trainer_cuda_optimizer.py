"""CN626: a Hugging Face Trainer optimizer name that selects a CUDA-only implementation."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.kernels import TrainerOptimizer, trainer_optimizers
from .._shared.strings import make_string, string_value

__all__ = ["TrainerCudaOptimizer"]

_OPTION = "optim"


def _names_optim(node: cst.BaseExpression) -> bool:
    """``optim``, ``args.optim``, ``self.optim``: a target whose last name is the option."""
    if isinstance(node, cst.Name):
        return node.value == _OPTION
    return isinstance(node, cst.Attribute) and node.attr.value == _OPTION


class TrainerCudaOptimizer(Rule):
    """
    ## What it does
    Rewrites Hugging Face Trainer optimizer names that select a CUDA-only implementation to
    the torch optimizer that does the same job: ``optim="paged_adamw_32bit"`` becomes
    ``optim="adamw_torch"``, ``"adamw_torch_fused"`` becomes ``"adamw_torch"``, and the 8-bit
    bitsandbytes names (``"adamw_bnb_8bit"``, ``"paged_adamw_8bit"``, ...) too with an unsafe fix.
    Names with no torch twin (bitsandbytes' Lion and AdEMAMix) are reported. The names are the
    table ``[trainer_optim.*]`` of ``rules/_shared/cuda_kernels.toml`` (transformers'
    ``OptimizerNames`` that import bitsandbytes or apex, or ask for a fused kernel). A name is read
    where it sets the option: ``optim=`` of any call (``TrainingArguments``, TRL's configs,
    ``dict(...)``), a ``"optim"`` key of a dict, the default of a field or an ``add_argument``
    assigned to ``optim`` (``optim: str = field(default="paged_adamw_32bit")``), or a plain
    assignment to ``optim`` / ``args.optim``.

    ## Why is this bad?
    The string never says "cuda", yet the Trainer imports bitsandbytes (CUDA kernels, paged
    optimizer state in CUDA unified memory) or apex for it, or asks torch for a fused CUDA kernel:
    the port stops when the Trainer builds its optimizer.

    ## Example
    ```python
    args = TrainingArguments(output_dir="out", optim="paged_adamw_32bit", bf16=True)
    ```
    becomes
    ```python
    args = TrainingArguments(output_dir="out", optim="adamw_torch", bf16=True)
    ```

    ## Fix safety
    Safe where the torch optimizer computes the same update (32-bit paged AdamW, fused AdamW,
    apex's FusedAdam, bitsandbytes' 32-bit RMSprop: paging and fusion change where and how fast,
    not what). Unsafe for the 8-bit names: the optimizer state takes four times the memory and
    the update loses the 8-bit quantization error. With ``--target accelerator`` (the port still
    runs on CUDA, where these work) the names are reported, not rewritten.
    """

    code = "CN626"
    name = "trainer-cuda-optimizer"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = tuple(sorted(trainer_optimizers()))
    VALID = (
        "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', optim='adamw_torch')\n",
        # A list of choices or an enum of the project's own names is not the option's value.
        "OPTIMS = ['adamw_torch', 'paged_adamw_32bit']\n",
        "class Names:\n    PAGED = 'paged_adamw_32bit'\n",
        "print('paged_adamw_32bit')\n",
        # the test of a conditional is not the option's value
        "from trl import SFTConfig\ncfg = SFTConfig(optim='adamw_torch' if name == 'paged_adamw_32bit' else 'sgd')\n",
    )
    INVALID = (
        Invalid(
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', optim='paged_adamw_32bit')\n",
            "from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o', optim='adamw_torch')\n",
        ),
        Invalid(
            "from dataclasses import dataclass, field\n\n@dataclass\nclass Args:\n"
            "    optim: str = field(default=\"paged_adamw_32bit\", metadata={'help': 'optimizer'})\n",
            "from dataclasses import dataclass, field\n\n@dataclass\nclass Args:\n"
            "    optim: str = field(default=\"adamw_torch\", metadata={'help': 'optimizer'})\n",
        ),
        Invalid("config = {'optim': 'adamw_torch_fused', 'lr': 1e-4}\n", "config = {'optim': 'adamw_torch', 'lr': 1e-4}\n"),
        Invalid("args.optim = 'adamw_bnb_8bit'\n", "args.optim = 'adamw_torch'\n", unsafe=True),
        Invalid(
            "parser.add_argument('--optim', default='paged_adamw_8bit')\n",
            "parser.add_argument('--optim', default='adamw_torch')\n",
            unsafe=True,
        ),
        Invalid("from trl import SFTConfig\ncfg = SFTConfig(optim='paged_lion_8bit')\n"),
        # smol-course's ORPO notebook: the bitsandbytes name on the CUDA branch of a device test
        Invalid(
            "from trl import ORPOConfig\ncfg = ORPOConfig(optim='paged_adamw_8bit' if device == 'cuda' else 'adamw_torch')\n",
            "from trl import ORPOConfig\ncfg = ORPOConfig(optim='adamw_torch' if device == 'cuda' else 'adamw_torch')\n",
            unsafe=True,
        ),
        Invalid("from transformers import TrainingArguments\nargs = TrainingArguments(optim='paged_adamw_32bit')\n", target="accelerator"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        row = trainer_optimizers().get(string_value(node) or "")
        if row is None or not self._sets_option(node):
            return
        message = f'`"{row.name}"` makes the Trainer build {row.what}, which does not run on Trainium'
        if not row.instead:
            self.report(
                node,
                message,
                guidance="no torch optimizer of the Trainer does this update: choose \"adamw_torch\" (the update "
                "changes), or write the optimizer with torch operations and pass it to the Trainer (optimizers=)",
                effort=Effort.MEDIUM,
            )
            return
        if self.context.settings.target != "neuron":
            self.report(node, message, guidance=f'on Trainium use optim="{row.instead}"', effort=Effort.LOW)
            return
        self._rewrite(node, row, message)

    def _rewrite(self, node: cst.SimpleString, row: TrainerOptimizer, message: str) -> None:
        safety = Safety.SAFE if row.same_update else Safety.UNSAFE
        self.report(
            node,
            message,
            replacement=make_string(row.instead, node),
            safety=safety,
            guidance="" if row.same_update else (
                f'"{row.instead}" keeps full-precision optimizer state (about four times the memory of the '
                "8-bit state) and drops its quantization error"
            ),
            effort=Effort.NONE if row.same_update else Effort.LOW,
            description=f'use the Trainer\'s torch optimizer "{row.instead}"',
        )

    def _sets_option(self, node: cst.SimpleString) -> bool:
        """Whether the literal is the value of the ``optim`` option (see the docs above)."""
        ancestors = tuple(self.context.ancestors)
        value: cst.BaseExpression = node
        # `optim="paged_adamw_8bit" if device == "cuda" else "adamw_torch"` (smol-course): either
        # branch is the option's value. The trap: CN103 ports the test to "neuron", which then
        # picks the bitsandbytes branch on Trainium.
        while ancestors and isinstance(ancestors[-1], cst.IfExp) and value is not ancestors[-1].test:
            value, ancestors = ancestors[-1], ancestors[:-1]
        parent = ancestors[-1] if ancestors else None
        if isinstance(parent, cst.Arg) and parent.keyword is not None:
            if parent.keyword.value == _OPTION:
                return True  # TrainingArguments(optim="..."), dict(optim=...)
            if parent.keyword.value == "default" and len(ancestors) >= 2 and isinstance(ancestors[-2], cst.Call):
                return self._default_of_option(ancestors[-2], ancestors[:-2])
            return False
        if isinstance(parent, cst.DictElement):
            return parent.value is value and string_value(parent.key) == _OPTION
        if isinstance(parent, cst.Assign):
            return any(_names_optim(t.target) for t in parent.targets)
        if isinstance(parent, cst.AnnAssign):
            return _names_optim(parent.target)
        return False

    def _default_of_option(self, call: cst.Call, above: tuple[cst.CSTNode, ...]) -> bool:
        """``field(default=...)`` assigned to ``optim``, or ``add_argument("--optim", default=...)``."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
            flags = [string_value(a.value) for a in call.args if a.keyword is None]
            return any(f is not None and f.lstrip("-").replace("-", "_") == _OPTION for f in flags)
        holder = above[-1] if above else None
        if isinstance(holder, cst.AnnAssign):
            return _names_optim(holder.target)
        if isinstance(holder, cst.Assign):
            return any(_names_optim(t.target) for t in holder.targets)
        return False
