"""CN112: code for another accelerator (XPU, MPS, HPU, NPU, ROCm), left as it is."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings

from .._shared.ast_names import ast_dotted
from .._shared.detector import AstDetector
from .._shared.foreign import _DEVICES, _PROBE_NAME, FOREIGN_MODULES, FOREIGN_WORDS, foreign_branches

__all__ = ["OtherAcceleratorCode"]

# What the residual pass calls naming CUDA: a branch without it needs no finding of its own.
_CUDA_WORDS = re.compile(r"cuda|nccl|cudnn|nvidia", re.IGNORECASE)
# ``torch.cuda.synchronize = ...`` / ``setattr(torch.cuda, ...)`` / ``@wraps(torch.cuda.x)``:
# the words of a module that patches torch.cuda, looked for before any node is.
_PATCH_WORDS = re.compile(r"torch\.cuda\.\w+\s*=[^=]|setattr\(\s*torch\.cuda\b|wraps\(\s*torch\.cuda\.")


class OtherAcceleratorCode(Rule):
    """
    ## What it does
    Reports, once per module, CUDA names in code written for another accelerator — a branch
    under a test for XPU, MPS, HPU, NPU or ROCm (``elif x.device.type == "mps":``,
    ``if torch.xpu.is_available():``, ``if torch.version.hip:``, ``hasattr(torch, "npu")``), or a
    whole module that patches ``torch.cuda`` for another backend
    (``torch.cuda.current_device = torch.xpu.current_device``, ``@wraps(torch.cuda.synchronize)``)
    — and keeps every other rule out of that code: no edit and no other finding there. Where
    no such branch of a module names CUDA, the rules that port code are still kept out (a CUDA
    question need not spell CUDA: ``torch.get_autocast_gpu_dtype()`` in a MUSA branch), and the
    finding is made only if one of them would have reported there; the rules that are not about
    CUDA (float64, complex numbers) may still report in such branches.

    ## Why is this bad?
    It is not: that code never runs on a CUDA machine, and never on Trainium. Rewriting the CUDA
    names in it breaks the accelerator it was written for (a ROCm branch calls ``torch.cuda``
    because HIP answers to that name; an XPU adapter assigns to ``torch.cuda`` on purpose, and
    moving its targets to ``torch.neuron`` even collapses two deprecated aliases into one
    target) and does nothing for Trainium. The finding says why the code was left.

    ## Example
    ```python
    if x.device.type == "cuda":
        torch.cuda.synchronize()
    elif x.device.type == "mps":
        torch.mps.synchronize()
    ```
    The ``cuda`` branch is ported (CN103, CN201); the ``mps`` branch is left as it is, and this
    rule says so.

    ## Fix safety
    Report only, informational: nothing to change. A module whose other-accelerator code should
    move to Neuron too is ported by hand. The finding sits on the first such branch that names
    CUDA (a patching module: on the whole module); a CUDA word in a later branch of the same
    module that no rule knows may still be listed by the residual pass (CN902).
    """

    code = "CN112"
    name = "other-accelerator-code"
    advisory = True
    # Only where CUDA is named, or asked about without its name (the AMP rules' autocast state
    # and GradScaler: ``torch.get_autocast_gpu_dtype()``, ``torch.amp.GradScaler()``), is there
    # anything to keep other rules out of. Trap: the fixed point wakes the rules again each
    # round, and once the CUDA branch is ported a file may spell "cuda" nowhere. The words of
    # the other accelerators are looked for when the rule starts (FOREIGN_WORDS).
    triggers = ("cuda", "autocast", "GradScaler")
    VALID = (
        'if x.device.type == "cuda":\n    y = 1\n',
        'ok = device in ("cuda", "mps")\n',
        "import torch\nif torch.cuda.is_available() or torch.xpu.is_available():\n    y = 1\n",
        "import torch\ntorch.cuda.current_device = fake_current_device\n",
        # Another accelerator's branch that names no CUDA: nothing to keep the CUDA rules from.
        'd = "xpu" if is_torch_xpu_available() else "cuda"\n',
        'import torch\nif x.device.type == "cuda":\n    pass\nelif x.device.type == "mps":\n    torch.mps.synchronize()\n',
    )
    INVALID = (
        Invalid('if x.device.type == "mps":\n    y = x.to("cuda")\n'),
        Invalid("import torch\nif torch.xpu.is_available():\n    torch.cuda.empty_cache()\n"),
        Invalid("import torch\nif not torch.version.hip:\n    pass\nelse:\n    torch.cuda.set_device(0)\n"),
        Invalid('import torch\nif hasattr(torch, "npu") and flag:\n    x = x.cuda()\n'),
        Invalid("import torch\nn = torch.cuda.device_count() if torch.version.hip else 0\n"),
        Invalid("import torch\ntorch.cuda.current_device = torch.xpu.current_device\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where the text names no other accelerator (``FOREIGN_WORDS``: the
        visitor never wakes), or where it has no word of a module patching ``torch.cuda`` and no
        ``if``/``else`` expression's test holds a leaf ``foreign_test`` could call foreign (every
        report needs such a branch); unsure elsewhere (libcst runs). Most files CN112 wakes on
        spell "mps" or "npu" in a table, a docstring or a longer word."""
        text = file.text
        if FOREIGN_WORDS.search(text) is None:
            return []
        if _PATCH_WORDS.search(text) is not None:
            return None
        return None if _Gate(cls, file).reports() is None else []

    def __init__(self, context) -> None:  # noqa: ANN001
        super().__init__(context)
        self._regions: list[cst.CSTNode] = []
        self._region_ids: set[int] = set()
        self._chains: dict[int, tuple[cst.CSTNode, ...]] = {}
        source = context.source
        self._awake = FOREIGN_WORDS.search(source) is not None
        self._patching = self._awake and _PATCH_WORDS.search(source) is not None
        self._patches = False  # a torch.cuda attribute assigned or wrapped
        self._foreign_names = False  # the module names another accelerator's module

    def visit_If(self, node: cst.If) -> None:
        if self._awake:
            self._branches(node)

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self._awake:
            self._branches(node)

    def _branches(self, node: cst.If | cst.IfExp) -> None:
        if self._regions and any(id(a) in self._region_ids for a in self.context.ancestors):
            return  # inside a branch already left: one place, not two
        found = foreign_branches(node, self.qualname)
        self._region_ids.update(id(r) for r in found)
        for region in found:
            # The chain above each branch, root first: the finding goes on the first that counts.
            self._chains[id(region)] = (*self.context.ancestors, node)
        self._regions += found

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if self._patching and _is_cuda_attribute(self.qualname(node.target)):
            self._patches = True

    def visit_Decorator(self, node: cst.Decorator) -> None:
        call = node.decorator
        if self._patching and isinstance(call, cst.Call) and call.args and self.qualname(call.func) == "functools.wraps":
            if _is_cuda_attribute(self.qualname(call.args[0].value)):
                self._patches = True

    def visit_Call(self, node: cst.Call) -> None:
        if self._patching and isinstance(node.func, cst.Name) and node.func.value == "setattr" and node.args:
            if self.qualname(node.args[0].value) == "torch.cuda":
                self._patches = True

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self._patching and not self._foreign_names:
            name = self.qualname(node)
            if name is not None and name.startswith(_FOREIGN_PREFIXES):
                self._foreign_names = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._patches and self._foreign_names:
            self.report(
                original_node,
                "this module adapts `torch.cuda` to another accelerator: left as it is",
                guidance=(
                    "its assignments to `torch.cuda` are meant for that accelerator and never run as CUDA "
                    "code; no rule edits or reports inside it. Port it by hand if Trainium needs the same"
                ),
                effort=Effort.NONE,
                ancestors=(),
                fences=(original_node,),
            )
            return
        if not self._regions:
            return
        # Only a branch that names CUDA is worth a word (one that does not, such as
        # ``torch.mps.synchronize()``, is fenced along with it, and alone needs none).
        named = [r for r in self._regions if _CUDA_WORDS.search(self.context.code(r))]
        if not named:
            # Trap: a CUDA question need not spell CUDA. ``torch.get_autocast_gpu_dtype()`` in
            # mmengine's MUSA branch is CN307's to move; the fence stands, and speaks only where
            # it kept such a rule out (python/_lint.py, Report.quiet).
            first = self._regions[0]
            self.report(
                first,
                "code for another accelerator (XPU, MPS, HPU, NPU or ROCm): left as it is",
                guidance="it runs neither on a CUDA machine nor on Trainium; no rule edits or reports inside it",
                effort=Effort.NONE,
                ancestors=self._chains[id(first)],
                fences=tuple(self._regions),
                quiet=True,
            )
            return
        first = named[0]
        count = len(named)
        self.report(
            first,
            "code for another accelerator (XPU, MPS, HPU, NPU or ROCm): left as it is"
            + (f" here and in {count - 1} more place(s) of this module" if count > 1 else ""),
            guidance=(
                "it runs neither on a CUDA machine nor on Trainium; no rule edits or reports inside it"
            ),
            effort=Effort.NONE,
            ancestors=self._chains[id(first)],
            fences=tuple(self._regions),
        )


_FOREIGN_PREFIXES = tuple(f"{m}." for m in FOREIGN_MODULES)


def _is_cuda_attribute(name: str | None) -> bool:
    return name is not None and name.startswith("torch.cuda.")


class _Gate(AstDetector):
    """``_branches`` above on CPython's ``ast``, as a superset: unsure at the first test that
    may select another accelerator's code (``_may_be_foreign``)."""

    def visit_If(self, node: ast.If) -> None:
        if _may_be_foreign(self.ctx, node.test):
            from cuda2neuron.python import Unsure

            raise Unsure("a test that may name another accelerator")

    visit_IfExp = visit_If


def _may_be_foreign(ctx, test: ast.expr) -> bool:  # noqa: ANN001 - python.AstWalk
    """Could ``foreign_test`` find ``test`` foreign or not-foreign (not None)? It can only from
    a leaf: a string literal naming another accelerator's device (a comparison, ``in``,
    ``hasattr``, ``startswith``, ``torch.device``), or a name resolved (or spelled) as a probe,
    ``torch.version.hip`` or a foreign module's ``is_available``. Any such leaf anywhere in the
    test makes this True: a superset, whatever the operators around it. Traps held: an escaped
    literal (``"\\x6dps"``; CPython's value is read), an alias bound by an import
    (``from accelerate.utils import is_xpu_available as xa``; resolved through the scope)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value.split(":", 1)[0].strip().lower() in _DEVICES:
                return True
        elif isinstance(node, (ast.Name, ast.Attribute)):
            for name in (ctx.qualname(node), ast_dotted(node)):
                if name is None:
                    continue
                if name == "torch.version.hip" or _PROBE_NAME.fullmatch(name.rsplit(".", 1)[-1]):
                    return True
                if name.endswith((".is_available", ".is_built", ".device_count")) and name.rsplit(".", 1)[0] in FOREIGN_MODULES:
                    return True
    return False


