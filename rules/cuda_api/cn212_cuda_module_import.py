"""CN212: ``import torch.cuda`` binds ``torch`` as ``import torch`` does; ``SDPBackend`` lives in
``torch.nn.attention``: the port says so."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings
from cuda2neuron.python import dotted_name

__all__ = ["CudaModuleImport"]

# `import torch` loads these itself (torch/__init__ imports torch.cuda and torch.backends' CUDA
# modules), so importing them by name adds nothing but the name.
_CUDA_MODULES = ("torch.cuda", "torch.backends.cudnn", "torch.backends.cuda")


# `torch.backends.cuda.SDPBackend` is `torch.nn.attention.SDPBackend` (the same enum, re-exported;
# `import torch` loads torch.nn.attention, which exists since torch 2.2): a device-agnostic name
# that the port should not import through a CUDA module.
_SDP_BACKEND = "torch.backends.cuda.SDPBackend"
_SDP_HOME = "torch.nn.attention"
_SDP_HOME_SINCE = (2, 2)


def _is_cuda_module(dotted: str) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in _CUDA_MODULES)


def _elsewhere(value: ast.expr) -> bool:
    """Is ``value.SDPBackend`` surely no ``torch.backends.cuda.SDPBackend``? A dotted chain of
    two parts or more whose last is not ``cuda`` (``torch.nn.attention``) resolves, whatever its
    root is bound to, to a name ending in that part."""
    if not isinstance(value, ast.Attribute) or value.attr == "cuda":
        return False
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name)


class CudaModuleImport(Rule):
    """
    ## What it does
    Rewrites ``import torch.cuda`` (and ``import torch.cuda.amp``, ``import torch.cuda.nvtx``...,
    ``import torch.backends.cudnn``, ``import torch.backends.cuda``, without ``as``) to ``import torch``, or drops it where the same statement or the module already
    has ``import torch``. Moves ``SDPBackend`` imported or spelled through ``torch.backends.cuda``
    to its home, ``torch.nn.attention``.

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
    judge ``tc``'s uses. ``torch.backends.cuda.SDPBackend`` is the very object
    ``torch.nn.attention.SDPBackend`` (torch >= 2.2; below ``--min-torch 2.2`` it is reported and kept);
    its CUDA kernels (``SDPBackend.FLASH_ATTENTION``...) are CN609's to report.
    """

    code = "CN212"
    name = "cuda-module-import"
    fixes = frozenset({Safety.SAFE})
    # `from torch.backends.cuda import SDPBackend` holds "torch.backends.cuda" too.
    triggers = ("torch.cuda", "torch.backends.cuda", "torch.backends.cudnn")
    VALID = (
        "import torch\n",
        "import torch.cuda as tc\ntc.synchronize()\n",
        "import torch.distributed\n",
        "import torch.backends.cudnn as cudnn\n",  # an alias: its uses are judged
        "from torch.cuda import amp\n",
        "from torch.nn.attention import SDPBackend\n",
        "from torch.backends.cuda import sdp_kernel\n",  # CN609's
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
        # Two CUDA modules on two lines: the first becomes `import torch`, the second goes.
        Invalid("import torch.cuda.memory\nimport torch.cuda.nvtx\nx = 1\n", "import torch\nx = 1\n"),
        Invalid("import torch.cuda\n", "import torch\n", target="accelerator"),
        Invalid("def f():\n    import torch.cuda\n    return torch.cuda.is_available()\n",
                "def f():\n    import torch\n    return torch.cuda.is_available()\n"),
        # generative-models' attention benchmark: the enum alone, through the CUDA module.
        Invalid("from torch.backends.cuda import SDPBackend\nb = SDPBackend.MATH\n",
                "from torch.nn.attention import SDPBackend\nb = SDPBackend.MATH\n"),
        Invalid("from torch.backends.cuda import SDPBackend as B\n", "from torch.nn.attention import SDPBackend as B\n",
                target="accelerator"),
        # Beside a name that stays (CN609 reports sdp_kernel): the enum gets an import of its own.
        Invalid("from torch.backends.cuda import SDPBackend, sdp_kernel\n",
                "from torch.backends.cuda import sdp_kernel\nfrom torch.nn.attention import SDPBackend\n"),
        Invalid("import torch\nb = torch.backends.cuda.SDPBackend.MATH\n", "import torch\nb = torch.nn.attention.SDPBackend.MATH\n"),
        Invalid("from torch.backends.cuda import SDPBackend as B, sdp_kernel\n"),  # an alias beside others: reported
        # Before torch 2.2 the enum has no other home: reported, kept.
        Invalid("from torch.backends.cuda import SDPBackend\n", options=(("min_torch", (2, 1)),)),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where nothing any visit reports is written, unsure elsewhere.
        Every report sits on an ``import`` of a CUDA module without ``as``, a from-import that
        names ``SDPBackend``, or an attribute ``.SDPBackend`` whose qualified name can be
        ``torch.backends.cuda.SDPBackend``: reached through a name alone (an alias of the module)
        or a chain ending in ``.cuda``. Most woken files only call ``torch.cuda.X`` (diffusers:
        none of its 195 imports such a module)."""
        sdp = "SDPBackend" in file.text
        for node in ast.walk(file.tree):
            if isinstance(node, ast.Import):
                if any(a.asname is None and _is_cuda_module(a.name) for a in node.names):
                    return None
            elif sdp and isinstance(node, ast.ImportFrom):
                if any(a.name == "SDPBackend" for a in node.names):
                    return None
            elif sdp and isinstance(node, ast.Attribute) and node.attr == "SDPBackend" and not _elsewhere(node.value):
                return None
        return []

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


    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        if dotted_name(node.module) != "torch.backends.cuda":
            return
        names = list(node.names)
        moved = [a for a in names if dotted_name(a.name) == "SDPBackend"]
        if not moved:
            return
        message = "`SDPBackend` is imported through `torch.backends.cuda`; it lives in `torch.nn.attention`"
        if not self._sdp_home_exists():
            self._report_old_torch(node, message)
            return
        if len(moved) == len(names):
            home = cst.parse_expression(_SDP_HOME)
            assert isinstance(home, (cst.Attribute, cst.Name))
            self.report(node, message, replacement=node.with_changes(module=home), description="import SDPBackend from torch.nn.attention")
            return
        if any(a.asname is not None for a in moved):
            # `SDPBackend as B` beside other names: the engine adds imports without aliases.
            self.report(
                node,
                message,
                guidance="Import it as `from torch.nn.attention import SDPBackend as ...` on a line of its own.",
                effort=Effort.NONE,
            )
            return
        keep = [a for a in names if a not in moved]
        last = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.report(
            node,
            message,
            replacement=node.with_changes(names=[*keep[:-1], last]),
            imports=((_SDP_HOME, "SDPBackend"),),
            description="import SDPBackend from torch.nn.attention",
        )

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "SDPBackend" or self.qualname(node) != _SDP_BACKEND:
            return
        message = "`torch.backends.cuda.SDPBackend` is `torch.nn.attention.SDPBackend`"
        if not self._sdp_home_exists():
            self._report_old_torch(node, message)
            return
        spelled = self.spell(f"{_SDP_HOME}.SDPBackend")
        if spelled is None:
            return
        expr, imports = spelled
        self.report(
            node,
            message,
            replacement=expr,
            imports=imports,
            description="spell SDPBackend from torch.nn.attention",
        )

    def _sdp_home_exists(self) -> bool:
        return self.context.settings.min_torch >= _SDP_HOME_SINCE

    def _report_old_torch(self, node: cst.CSTNode, message: str) -> None:
        self.report(
            node,
            message,
            guidance="torch before 2.2 has no torch.nn.attention: keep the import (torch.backends.cuda is a pure-Python "
            "module that every torch build has) and move it to torch.nn.attention once --min-torch reaches 2.2.",
            effort=Effort.NONE,
        )

    def _module_imports_torch(self, node: cst.Import) -> bool:
        """Another module-level statement already says `import torch`, or an earlier one imports a
        CUDA module this rule turns into `import torch` (xformers' profiler: `import
        torch.cuda.memory` then `import torch.cuda.nvtx` became two `import torch`). Only for a
        module-level import."""
        body = self.context.module.body
        if not any(isinstance(s, cst.SimpleStatementLine) and node in s.body for s in body):
            return False
        earlier = True
        for stmt in body:
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            if node in stmt.body:
                earlier = False
                continue
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                    a.asname is None and self._binds_torch(self.context.code(a.name), earlier) for a in small.names
                ):
                    return True
        return False

    @staticmethod
    def _binds_torch(dotted: str, earlier: bool) -> bool:
        return dotted == "torch" or (earlier and _is_cuda_module(dotted))
