"""CN112: code for another accelerator (XPU, MPS, HPU, NPU, ROCm), left as it is."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Span

from .._shared.detector import AstDetector
from .._shared.foreign import FOREIGN_MODULES, FOREIGN_WORDS, foreign_branches
from .._shared.foreign_ast import foreign_test_ast

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
        """The visitor on CPython's ``ast`` (``_Detector``): no finding where the text names no
        other accelerator (``FOREIGN_WORDS``: the visitor never wakes); unsure in a module that
        may patch ``torch.cuda``. Elsewhere the branches are found as the visitor finds them and
        handed to the engine as fences (``record_fence``), which drops the other detectors'
        findings inside them as ``python/_lint.py`` drops reports; unsure where the span or text
        libcst gives a branch cannot be told from ``ast`` (a block on its header's line, comments
        after a nested block)."""
        text = file.text
        if FOREIGN_WORDS.search(text) is None:
            return []
        if _PATCH_WORDS.search(text) is not None:
            return None
        return _Detector(cls, file).found()

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


class _Detector(AstDetector):
    """``_branches`` and ``leave_Module`` above on CPython's ``ast``. A region is a block (the
    statements of a body, libcst's ``IndentedBlock``) or a node (an ``if`` expression's branch,
    an ``elif``); ``_regions`` holds each as (span, narrow text, wide text): the text libcst's
    ``code`` gives it (which ``leave_Module`` searches for a CUDA word) holds the narrow one and
    lies inside the wide one, and where the two disagree on a CUDA word the detector is unsure."""

    def found(self) -> list[Finding] | None:
        self._regions: list[tuple[Span, str, str]] = []
        self._inside: set[int] = set()  # the statements of fenced blocks
        self._nodes: set[int] = set()  # fenced nodes and the statements of fenced blocks
        if self.reports() is None:
            return None
        if not self._regions:
            return []
        from cuda2neuron.python import record_fence

        named = []
        for span, narrow, wide in self._regions:
            cuda = _CUDA_WORDS.search(narrow) is not None
            if cuda != (_CUDA_WORDS.search(wide) is not None):
                return None  # a comment beside the block decides: libcst's to read
            if cuda:
                named.append(span)
        spans = [span for span, _, _ in self._regions]
        quiet = not named
        first = spans[0] if quiet else named[0]
        if quiet:
            message = "code for another accelerator (XPU, MPS, HPU, NPU or ROCm): left as it is"
        else:
            count = len(named)
            message = "code for another accelerator (XPU, MPS, HPU, NPU or ROCm): left as it is" + (
                f" here and in {count - 1} more place(s) of this module" if count > 1 else ""
            )
        finding = Finding(
            code=self.rule.code,
            name=self.rule.name,
            message=message,
            path=self.file.path,
            span=first,
            guidance="it runs neither on a CUDA machine nor on Trainium; no rule edits or reports inside it",
            effort=Effort.NONE,
        )
        record_fence(self.file, finding, spans, quiet)
        return [finding]

    def visit_If(self, node: ast.If | ast.IfExp) -> None:
        ancestors = self.ctx.ancestors
        if self._nodes and (id(node) in self._inside or any(id(a) in self._nodes for a in ancestors)):
            return
        verdict = foreign_test_ast(self.ctx, node.test)
        if verdict is None:
            return
        if any(isinstance(a, ast.JoinedStr) for a in ancestors):
            from cuda2neuron.python import Unsure

            raise Unsure("a branch inside an f-string, where CPython 3.11 may misplace positions")
        if isinstance(node, ast.IfExp):
            self._region_node(node.body if verdict else node.orelse, node)
        elif verdict:
            self._region_block(node, node.body)
        elif len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) and _is_elif(self.file, node, node.orelse[0]):
            self._region_elif(node, node.orelse[0])
        elif node.orelse:
            self._region_block(node, node.orelse)

    visit_IfExp = visit_If

    def _region_node(self, branch: ast.expr, owner: ast.IfExp) -> None:
        """An ``if`` expression's branch: libcst's code of it is its written text, parentheses
        included (``written_bounds``); its span excludes them, as ``AstFile.span``'s does."""
        from cuda2neuron.python import written_bounds

        start, end = written_bounds(self.file, branch, (*self.ctx.ancestors, owner))
        text = self.file.text[start:end]
        self._regions.append((self.file.span(branch), text, text))
        self._nodes.add(id(branch))

    def _region_block(self, owner: ast.If, body: list[ast.stmt]) -> None:
        """A block: libcst's span runs from the line after its header (the colon's line, above
        the first statement's comments) to the line after its last statement; its code adds the
        header's comment and the footer's lines, which lie between the colon and the next line
        of code (the wide text)."""
        from cuda2neuron.python import Unsure

        file = self.file
        lines = _lines(file)
        first, last = body[0], body[-1]
        first_line = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
        header = first_line - 1  # the line of the colon: above the first statement's comments
        while header >= 1 and _blank_or_comment(lines[header - 1]):
            header -= 1
        indent = lines[first_line - 1][: file.column(first_line, first.col_offset) if first_line == first.lineno else 0]
        if header < 1 or indent.strip(" \t\f"):
            raise Unsure("a block on its header's line (libcst's SimpleStatementSuite)")
        colon = _colon(lines[header - 1])
        if colon is None:
            raise Unsure("a block on its header's line, or a header libcst may read otherwise")
        end_line, wide_end = self._block_end(last)
        starts = file._line_starts()
        narrow = file.text[file.offset(first_line, 0) : file.offset(last.end_lineno, last.end_col_offset)]
        wide = file.text[starts[header - 1] + colon : wide_end]
        self._regions.append((Span(header + 1, 0, end_line, 0), narrow, wide))
        ids = {id(s) for s in body}
        self._inside |= ids
        self._nodes |= ids

    def _region_elif(self, owner: ast.If, elif_: ast.If) -> None:
        """An ``elif`` chain fenced whole: libcst's span starts at the keyword and ends past the
        chain's last line (a comment below it may be its block's footer: unsure there)."""
        file = self.file
        start = file.offset(elif_.lineno, elif_.col_offset)
        end_line, wide_end = self._block_end(elif_)
        last = owner.body[-1]
        narrow = file.text[start : file.offset(elif_.end_lineno, elif_.end_col_offset)]
        wide = file.text[file.offset(last.end_lineno, last.end_col_offset) : wide_end]
        self._regions.append((Span(elif_.lineno, file.column(elif_.lineno, elif_.col_offset), end_line, 0), narrow, wide))
        self._nodes.add(id(elif_))

    def _block_end(self, last: ast.stmt) -> tuple[int, int]:
        """Where libcst's span of a block (or compound statement) ending in ``last`` ends, as a
        line (its column is 0) and the text offset of the next line of code after it: the
        line after ``last``'s. A comment or blank line below a compound ``last`` may be the
        footer of its inner block, inside the span: unsure."""
        from cuda2neuron.python import Unsure

        file = self.file
        lines = _lines(file)
        after = last.end_lineno + 1
        code = after
        while code <= len(lines) and _blank_or_comment(lines[code - 1]):
            code += 1
        if code > after and _compound(last):
            raise Unsure("lines below a nested block: its footer or the next statement's")
        starts = file._line_starts()
        wide_end = starts[code - 1] if code <= len(starts) else len(file.text)
        return after, wide_end


_COMPOUND = (
    ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef, ast.AsyncFunctionDef,
    ast.ClassDef, getattr(ast, "TryStar", ast.Try), getattr(ast, "Match", ast.Try),
)


def _compound(stmt: ast.stmt) -> bool:
    return isinstance(stmt, _COMPOUND)


def _lines(file) -> list[str]:  # noqa: ANN001 - python.AstFile
    """The file's lines without their breaks (cached on the file: one split per walk)."""
    lines = getattr(file, "_cn112_lines", None)
    if lines is None:
        starts = file._line_starts()
        text = file.text
        lines = [text[a:b].rstrip("\r\n") for a, b in zip(starts, [*starts[1:], len(text)])]
        if starts[-1] == len(text) and len(starts) > 1:
            lines.pop()  # the empty "line" after the last break is none
        file._cn112_lines = lines
    return lines


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip(" \t\f")
    return not stripped or stripped.startswith("#")


def _colon(line: str) -> int | None:
    """The column of the colon that ends a block's header line, or None where the line has none
    at its end (a block written on the header's line) or quotes make its comment unclear."""
    code = line
    if "#" in line:
        if "'" in line or '"' in line:
            return None
        code = line[: line.index("#")]
    code = code.rstrip(" \t\f")
    return len(code) - 1 if code.endswith(":") else None


def _is_elif(file, stmt: ast.If, inner: ast.If) -> bool:  # noqa: ANN001 - python.AstFile
    return file.text.startswith("elif", file.offset(inner.lineno, inner.col_offset))
