"""CN212: ``import torch.cuda`` binds ``torch`` as ``import torch`` does: the port says so."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Invalid, Rule, Safety

__all__ = ["CudaModuleImport"]

# `import torch` loads these itself (torch/__init__ imports torch.cuda and torch.backends' CUDA
# modules), so importing them by name adds nothing but the name.
_CUDA_MODULES = ("torch.cuda", "torch.backends.cudnn", "torch.backends.cuda")


def _is_cuda_module(dotted: str) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in _CUDA_MODULES)


class CudaModuleImport(Rule):
    """
    ## What it does
    Rewrites ``import torch.cuda`` (and ``import torch.cuda.amp``, ``import torch.cuda.nvtx``...,
    ``import torch.backends.cudnn``, ``import torch.backends.cuda``, without ``as``) to ``import torch``, or drops it where the same statement or the module already
    has ``import torch``.

    ## Why is this bad?
    Such an import is there for its ``torch`` binding: ``torch.cuda.synchronize()`` below it. Once
    those uses are ported (``torch.neuron.synchronize()``), the CUDA module name is all that is left
    of CUDA in the file, and a reader, a grep or a pre-commit check takes it for a CUDA dependency.

    ## Example
    ```python
    import torch.cuda
    torch.cuda.synchronize()
    ```
    becomes
    ```python
    import torch
    torch.neuron.synchronize()
    ```

    ## Fix safety
    Safe: ``import torch`` imports ``torch.cuda``, ``torch.backends.cudnn``, ``torch.backends.cuda`` and their submodules itself, so both statements
    bind the same ``torch`` and load the same modules; uses of ``torch.cuda`` left in the file are
    reported by their own rules. ``import torch.cuda as tc`` (an alias) is left to the rules that
    judge ``tc``'s uses.
    """

    code = "CN212"
    name = "cuda-module-import"
    fixes = frozenset({Safety.SAFE})
    triggers = ("torch.cuda", "torch.backends.cuda", "torch.backends.cudnn")
    VALID = (
        "import torch\n",
        "import torch.cuda as tc\ntc.synchronize()\n",
        "import torch.distributed\n",
        "import torch.backends.cudnn as cudnn\n",  # an alias: its uses are judged
        "from torch.cuda import amp\n",
    )
    INVALID = (
        # Alone the rule changes the import only; CN201 moves the call (the Example shows both).
        Invalid("import torch.cuda\ntorch.cuda.synchronize()\n", "import torch\ntorch.cuda.synchronize()\n"),
        Invalid("import os, torch.cuda.amp\n", "import os, torch\n"),
        Invalid("import torch, torch.cuda\n", "import torch\n"),
        # Lightning's launchers: the flag is read through `torch.` below it.
        Invalid("import torch\nimport torch.backends.cudnn\nb = torch.backends.cudnn.benchmark\n", "import torch\nb = torch.backends.cudnn.benchmark\n"),
        Invalid("import torch.backends.cuda\n", "import torch\n"),
        Invalid("import torch\nimport torch.cuda\nx = 1\n", "import torch\nx = 1\n"),
        Invalid("import torch.cuda\n", "import torch\n", target="accelerator"),
        Invalid("def f():\n    import torch.cuda\n    return torch.cuda.is_available()\n",
                "def f():\n    import torch\n    return torch.cuda.is_available()\n"),
    )

    def visit_Import(self, node: cst.Import) -> None:
        names = list(node.names)
        keep: list[cst.ImportAlias] = []
        changed = False
        first = ""  # the first CUDA module named, for the message
        binds_torch = self._module_imports_torch(node)
        for alias in names:
            dotted = self.context.code(alias.name)
            if alias.asname is None and _is_cuda_module(dotted):
                changed = True
                first = first or dotted
                if binds_torch or any(self.context.code(a.name) == "torch" and a.asname is None for a in keep):
                    continue
                binds_torch = True
                alias = alias.with_changes(name=cst.Name("torch"))
            elif alias.asname is None and self.context.code(alias.name) == "torch":
                if binds_torch:
                    continue
                binds_torch = True
            keep.append(alias)
        if not changed:
            return
        replacement: cst.CSTNode | cst.RemovalSentinel
        if keep:
            last = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            replacement = node.with_changes(names=[*keep[:-1], last])
        else:
            replacement = cst.RemovalSentinel.REMOVE
        self.report(node, f"`import {first}` is `import torch` with a CUDA module's name", replacement=replacement)


    def _module_imports_torch(self, node: cst.Import) -> bool:
        """Another module-level statement already says `import torch` (only for a module-level import)."""
        body = self.context.module.body
        if not any(isinstance(s, cst.SimpleStatementLine) and node in s.body for s in body):
            return False
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine) or node in stmt.body:
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                    a.asname is None and self.context.code(a.name) == "torch" for a in small.names
                ):
                    return True
        return False
