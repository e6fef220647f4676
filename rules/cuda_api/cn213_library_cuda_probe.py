"""CN213: CUDA probes of libraries (``transformers.utils.is_torch_cuda_available()`` and kin)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.names import call_qualname, import_to_drop
from .._shared.selected import opened_code, selected_code
from .._shared.tables import read_table
from .._shared.target import spell_for_target

__all__ = ["LibraryCudaProbe"]

TABLE = Path(__file__).with_name("library_probes.toml")


@dataclass(frozen=True)
class _Probe:
    asks: str
    neuron: str
    accelerator: str | None


class ProbeTableError(ValueError):
    """library_probes.toml is malformed (raised when the rule first reads it)."""


@lru_cache(maxsize=1)
def _table() -> dict[str, _Probe]:
    """The rows of library_probes.toml keyed by the probe's qualified name."""
    rows = {}
    for name, row in read_table(TABLE).get("probe", {}).items():
        if not {"asks", "neuron"} <= set(row) <= {"asks", "neuron", "accelerator"}:
            raise ProbeTableError(f"{TABLE.name}: [probe.\"{name}\"] needs asks and neuron (accelerator optional), got {sorted(row)}")
        rows[name] = _Probe(row["asks"], row["neuron"], row.get("accelerator"))
    return rows


@lru_cache(maxsize=1)
def _short_names() -> frozenset[str]:
    return frozenset(name.rpartition(".")[2] for name in _table())


class LibraryCudaProbe(Rule):
    """
    ## What it does
    Rewrites calls of the CUDA probes that libraries export to the neuron device's own answer:
    ``transformers.utils.is_torch_cuda_available()`` and accelerate's
    ``accelerate.utils.is_cuda_available()`` become ``torch.neuron.is_available()``,
    ``transformers.utils.is_torch_bf16_gpu_available()`` becomes
    ``torch.neuron.is_bf16_supported()``. The probes are a data table, ``library_probes.toml``;
    names are resolved through the file's imports.

    ## Why is this bad?
    The probe asks about CUDA only: on Trainium it answers False, so the code it guards takes
    its CPU (or float32) path while the rest of the port runs on the neuron device — the same
    trap as a ``torch.cuda.is_available()`` left in place, one call away, where no rule that
    looks for ``torch.cuda`` sees it.

    ## Example
    ```python
    from transformers.utils import is_torch_cuda_available
    if is_torch_cuda_available():
        torch.cuda.empty_cache()
    ```
    becomes (the import goes once nothing else uses it; CN201 moves the call inside)
    ```python
    import torch

    if torch.neuron.is_available():
        torch.neuron.empty_cache()
    ```

    ## Fix safety
    Safe: the neuron call answers the question the probe asked, for the device the port runs
    on. As with ``torch.cuda.is_available()``, a probe that selects code no rule can move (a
    CUDA kernel) keeps its branch and waits with it. With ``--target accelerator``,
    ``torch.accelerator.is_available()`` where min-torch allows it; the bfloat16 probe has no
    device-agnostic twin there and is reported.
    """

    code = "CN213"
    name = "library-cuda-probe"
    fixes = frozenset({Safety.SAFE})
    triggers = ("is_torch_cuda_available", "is_torch_bf16_gpu_available", "is_cuda_available")
    emits = ("torch.neuron.is_available", "torch.neuron.is_bf16_supported", "torch.accelerator.is_available")
    VALID = (
        # A project's own function of the same name, and Lightning's (CN108's).
        "def is_torch_cuda_available():\n    return False\nif is_torch_cuda_available():\n    pass\n",
        "from lightning.fabric.accelerators.cuda import is_cuda_available\nok = is_cuda_available()\n",
        "from transformers.utils import is_torch_cuda_available\n",  # the import alone
    )
    INVALID = (
        Invalid(
            "from transformers.utils import is_torch_cuda_available\n"
            "if is_torch_cuda_available():\n    torch.cuda.empty_cache()\n",
            "import torch\n\nif torch.neuron.is_available():\n    torch.cuda.empty_cache()\n",
        ),
        Invalid(
            "import transformers.utils\nbf16 = transformers.utils.is_torch_bf16_gpu_available()\n",
            "import transformers.utils\nimport torch\n\nbf16 = torch.neuron.is_bf16_supported()\n",
        ),
        Invalid(
            "from accelerate.utils import is_cuda_available\nn = 1 if is_cuda_available() else 0\n",
            "import torch\n\nn = 1 if torch.neuron.is_available() else 0\n",
        ),
        Invalid(
            "from transformers.utils import is_torch_cuda_available\nuse = is_torch_cuda_available()\n",
            "import torch\n\nuse = torch.accelerator.is_available()\n",
            target="accelerator",
        ),
        # No device-agnostic bfloat16 probe: reported on the accelerator target.
        Invalid("from transformers.utils import is_torch_bf16_gpu_available\nb = is_torch_bf16_gpu_available()\n",
                target="accelerator"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        short = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else ""
        if short not in _short_names():
            return
        qualified = call_qualname(self, node)
        probe = _table().get(qualified or "")
        if probe is None:
            return
        target = probe.neuron if self.context.settings.target == "neuron" else probe.accelerator
        message = f"`{short}()` asks {probe.asks}: on Trainium it answers False"
        spelled = spell_for_target(self, target) if target else None
        if spelled is None:
            self.report(
                node,
                message,
                guidance=f"ask the device the port runs on instead (`{probe.neuron}()` on Trainium)",
                effort=Effort.LOW,
                depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
            )
            return
        expr, imports = spelled
        self.report(
            node,
            message,
            replacement=node.with_changes(func=expr, args=()),
            safety=Safety.SAFE,
            imports=imports,
            unused_imports=import_to_drop(self, func),
            description=f"use `{target}()`",
            guidance=f"Use `{target}()` instead.",
            depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
        )
