"""Audit a port the way a reviewer would: is every CUDA construct left in it pointed at by a finding?

    python bench/audit_port.py PROJECT [--target neuron|accelerator] [--keep DIR]

Migrates PROJECT into a temporary copy (`migrate --out`), checks the copy (`check
--output-format json`: what is left is what the report tells the user to do), then reads every
Python file of the copy with `tokenize` and lists each line whose code (not its comments or
docstrings) still holds a CUDA word — `cuda`, `nccl`, `cudnn`, `triton`, `tilelang`, `cutlass`, `helion`,
`_scaled_mm`, `float8`, or a compiled extension the project builds — on which no finding of the
port points. Those are silent misses: the port would stop on Trainium while the report said
nothing. Prints one summary line (files, edits, manual actions, silent misses) and the misses.

The word list is deliberately wide: a line like `if device == "cuda":` that the tool correctly
leaves alone (the test reads as false on neuron) shows up here too, with its finding if it has
one. Read the list; what is left is either a miss to fix or a line to justify.

A finding points at the whole statement it is on, at the `except ImportError:` fallback of a
reported import in a `try`, at an import whose bound name is read only on lines findings point
at (`import torch.backends.cudnn as cudnn` before a reported `cudnn.benchmark = True`), and
(for a kernel-stack finding on a decorator or `def`) at the whole kernel. A line is counted as holding no CUDA construct, and listed with `--excused`, when
each of its CUDA words is one of: a name the project itself defines (`def _require_cuda()`,
`torch_cuda_version = ...`, also spelled as a string: `setattr(mod, "has_cuda_capability", ...)`,
a string annotation `"CUDAGraphWrapper"`, a dotted path through the project's modules; the bare
word `cuda` only where it is provably the project's: a
parameter of its function and the reads of it there, a keyword passed to its own function or class
that has that parameter, a `self.cuda` field it assigns, a field of its class read off an instance
and never called (`args.cuda` with `class Args: cuda: bool`), a variable `cuda` a function assigns and
its reads there, a string of `__all__` naming its def, a part of a `from` path that is a module
of the tree; a pytest marker it registers with `addinivalue_line("markers", ...)`, and
`pytest.mark.<that name>`), a name bound by a reported import (the
`cuda` of `import cuda.bindings.driver as cuda`), a string used as a key of the program's own
data (`checkpoint["cuda_rng_state"]`, `cfg.get("cudnn_deterministic_mode")`, not
`os.environ["PYTORCH_CUDA_ALLOC_CONF"]`), the
`"cuda"` key of a dict that also has a `"neuron"` key (a device table the port extended), the
package of a `pytest.importorskip("tilelang")` (the test skips on Neuron, as it should), the
kernel language in a file whose kernels are reported, a label (a test id `pytest.param(...,
id="flash-cuda-bf16")` or `ids=[...]`, an option's name `add_argument("--use_triton")`; the
values beside them stay code), a project's name in an f-string's placeholder
(`f"{cuda_profile_dir}/*.json"`), NVIDIA Triton Inference Server's network client (`tritonclient`),
or an attribute reached through a name a reported import binds (`bnb.nn.triton_based_modules`
after a reported `import bitsandbytes as bnb`; never through `torch`).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

WORDS = re.compile(r"cuda|nccl|cudnn|triton|tilelang|cutlass|helion|_scaled_mm|float8|\bcupy\b", re.IGNORECASE)
# Kernel stacks: a file that imports one is reported once, at the import; its kernel bodies,
# which use the stack on every line, count as pointed at when the file has such a finding.
STACKS = ("triton", "tilelang", "cutlass", "helion", "cupy")
# Words that mention CUDA without depending on it.
HARMLESS = re.compile(r"cuda2neuron|neuron", re.IGNORECASE)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuda2neuron", *args], capture_output=True, text=True)


def _code_lines(path: Path) -> dict[int, list[tokenize.TokenInfo]]:
    """Line -> the code tokens of that line that hold a CUDA word (comments and docstrings out)."""
    out: dict[int, list[tokenize.TokenInfo]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8", errors="replace")).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return out
    prev = None
    for tok in tokens:
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            if tok.type != tokenize.COMMENT:
                prev = tok
            continue
        # A string standing alone as a statement is a docstring.
        docstring = tok.type == tokenize.STRING and (prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL))
        prev = tok
        # A string with spaces is prose (a log or error message), not a device name or a module.
        if docstring or (tok.type == tokenize.STRING and " " in tok.string.strip("'\"")):
            continue
        if WORDS.search(tok.string) and not HARMLESS.fullmatch(tok.string):
            out.setdefault(tok.start[0], []).append(tok)
    return out


# A bare word is the API itself (`x.cuda()`, `torch.version.cuda`, `"nccl"`): never excused as a
# name of the project's, even where the project also defines something of that name.
_BARE = re.compile(r"_*(?:cuda|nccl|cudnn|triton|tilelang|cutlass|helion|cupy)_*", re.IGNORECASE)


class _Names(ast.NodeVisitor):
    """What a module defines and imports, and the shape of the code around a token."""

    def __init__(self) -> None:
        self.defined: set[str] = set()  # functions, classes, parameters, variables, attributes
        self.imported: dict[str, int] = {}  # bound name -> line of its import
        self.foreign: set[str] = set()  # bound names imported from outside the project
        self.project_modules: frozenset[str] = frozenset()  # top-level names of the project's own modules
        self.keys: set[tuple[int, int]] = set()  # (line, col) of strings used as mapping keys
        self.uses: dict[str, set[int]] = {}  # name -> lines where it is read
        self.statements: list[ast.stmt] = []
        self.skips: set[tuple[int, int]] = set()  # (line, col) of `pytest.importorskip("pkg")` names
        # (line, col) of labels: a test id (`pytest.param(..., id="cuda-bf16")`, `ids=[...]`) and
        # the name of a command-line option (`add_argument("--use_triton")`, `addoption("--cuda_ver")`)
        self.labels: set[tuple[int, int]] = set()
        # The project's own bare-word names (`def f(cuda=True)`, `self.cuda = ...`): where they are
        # written, by (line, byte col). Resolved against the whole project in `classify`.
        self.params: dict[str, set[str]] = {}  # function or class -> its parameter names
        self.param_names: set[tuple[int, int]] = set()  # a parameter, and its reads in its function
        self.keywords: list[tuple[int, int, str, str]] = []  # (line, col, callee, keyword) of `f(cuda=...)`
        self.attr_stores: set[str] = set()  # attributes the module assigns on self (`self.cuda = ...`)
        self.attr_reads: list[tuple[int, int, str]] = []  # (line, col, attr) of `self.attr`, not called
        self.exported: list[tuple[int, int, str]] = []  # (line, col, name) of the strings of `__all__`
        self.own_import_paths: list[tuple[int, tuple[str, ...]]] = []  # (line, module parts) of `from own.mod import`
        self.local_names: set[tuple[int, int]] = set()  # a variable a function assigns (`cuda = ...`), and its reads there
        self.device_tables: set[tuple[int, int]] = set()  # "cuda" keys of a dict that also has a "neuron" key
        self.markers: dict[str, list[tuple[int, int]]] = {}  # pytest markers registered here -> where the string is
        self.marker_uses: list[tuple[int, int, str]] = []  # (line, col, name) of `pytest.mark.<name>`
        # `class RNGType(Enum): CUDA = "cuda"`, then `RNGType.CUDA`: a member of the project's class.
        self.members: dict[str, set[str]] = {}  # class -> names its body assigns
        self.member_defs: set[tuple[int, int]] = set()  # where such a name is assigned
        self.member_reads: list[tuple[int, int, str, str]] = []  # (line, col, class, attr) of `Cls.attr`
        self.field_reads: list[tuple[int, int, str, str]] = []  # (line, col, receiver, attr) of `args.cuda`, not called
        self._scopes: list[set[str]] = []
        self._locals: list[set[str]] = []
        self._classes: list[str] = []
        self._called: set[int] = set()

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.statements.append(node)
        super().generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        args = node.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        params = {a.arg for a in every}
        if not isinstance(node, ast.Lambda):
            self.defined.add(node.name)
            self.params.setdefault(node.name, set()).update(params)
            if node.name == "__init__" and self._classes:
                # `BacktranslationDataset(..., cuda=True)` passes the parameter of its __init__.
                self.params.setdefault(self._classes[-1], set()).update(params)
        self._scopes.append(params)
        # `cuda = torch.device("neuron")` in a test's setUp (torchtitan): a bare word the function
        # assigns is its local variable everywhere in it (Python's scoping), unless declared global.
        body = node.body if isinstance(node.body, list) else [node.body]
        declared = {n for b in body for sub in ast.walk(b) if isinstance(sub, (ast.Global, ast.Nonlocal)) for n in sub.names}
        assigned = {
            sub.id for b in body for sub in ast.walk(b)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and _BARE.fullmatch(sub.id)
        }
        self._locals.append(assigned - declared - params)
        self.generic_visit(node)
        self._locals.pop()
        self._scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.defined.add(node.name)
        for stmt in node.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Name):
                    self.members.setdefault(node.name, set()).add(t.id)
                    self.member_defs.add((t.lineno, t.col_offset))
        self._classes.append(node.name)
        # A class body is no function scope: its names are not parameters of an enclosing def.
        outer, self._scopes = self._scopes, []
        self.generic_visit(node)
        self._scopes = outer
        self._classes.pop()

    def visit_arg(self, node: ast.arg) -> None:
        self.defined.add(node.arg)
        self.param_names.add((node.lineno, node.col_offset))
        self.generic_visit(node)  # its annotation

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.defined.add(node.id)
        elif isinstance(node.ctx, ast.Load):
            self.uses.setdefault(node.id, set()).add(node.lineno)
        # `if cuda:` inside `def f(..., cuda=True)`: the parameter, read.
        if any(node.id in scope for scope in self._scopes):
            self.param_names.add((node.lineno, node.col_offset))
        elif self._locals and node.id in self._locals[-1]:
            self.local_names.add((node.lineno, node.col_offset))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Store):
            self.defined.add(node.attr)
        # `self.cuda = torch.cuda.is_available() and ...` then `if self.cuda:` (fairseq's Trainer):
        # a field of the project's own object. Only on `self`, and never called: `x.cuda()` and
        # `torch.cuda` are the API whatever x is, and `torch.cuda = Mock()` is no field of ours.
        if isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
            where = (node.end_lineno or node.lineno, (node.end_col_offset or 0) - len(node.attr.encode("utf-8")))
            self.marker_uses.append((*where, node.attr))
        if isinstance(node.value, ast.Name) and node.value.id != "self":
            where = (node.end_lineno or node.lineno, (node.end_col_offset or 0) - len(node.attr.encode("utf-8")))
            self.member_reads.append((*where, node.value.id, node.attr))
            if id(node) not in self._called:
                self.field_reads.append((*where, node.value.id, node.attr))
        if isinstance(node.value, ast.Name) and node.value.id == "self" and id(node) not in self._called:
            if isinstance(node.ctx, ast.Store):
                self.attr_stores.add(node.attr)
            # Where the attribute's name is written: at the end of the node.
            where = (node.end_lineno or node.lineno, (node.end_col_offset or 0) - len(node.attr.encode("utf-8")))
            self.attr_reads.append((*where, node.attr))
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.imported[bound] = node.lineno
            if alias.name.split(".")[0] not in self.project_modules:
                self.foreign.add(bound)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        # `from .utils import move_to_cuda` / `from fairseq.utils import move_to_cuda` bind a name
        # the project defines; only an import from outside it makes a name foreign.
        own = node.level > 0 or (node.module or "").split(".")[0] in self.project_modules
        if own and node.module:
            self.own_import_paths.append((node.lineno, (node.level, *node.module.split("."))))
        for alias in node.names:
            bound = alias.asname or alias.name
            self.imported[bound] = node.lineno
            if not own:
                self.foreign.add(bound)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        # `pytest.importorskip("tilelang")`: the test skips where the package is absent, which
        # is the right answer on Neuron.
        func = node.func
        self._called.add(id(func))
        callee = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        root = func
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        # `lib.load(cuda=True)` passes a keyword to a library even where the project has a
        # `load(cuda=...)` of its own: the callee must not hang off an imported foreign name.
        if callee is not None and not (isinstance(root, ast.Name) and root.id in self.foreign):
            self.keywords.extend((k.lineno, k.col_offset, callee, k.arg) for k in node.keywords if k.arg is not None)
        # `config.addinivalue_line("markers", "requires_cuda: ...")`: the project registers a
        # pytest marker of that name; `@pytest.mark.requires_cuda` then uses the project's name.
        if isinstance(func, ast.Attribute) and func.attr == "addinivalue_line" and len(node.args) == 2:
            kind, text = node.args
            if isinstance(kind, ast.Constant) and kind.value == "markers" and isinstance(text, ast.Constant) and isinstance(text.value, str):
                name = re.split(r"[:(\s]", text.value.strip(), maxsplit=1)[0]
                self.markers.setdefault(name, []).append((text.lineno, text.col_offset))
        # `cfg.get("cudnn_deterministic_mode", None)`: a key of the program's own config, like
        # `cfg["..."]`; `os.environ.get("...")` and `os.getenv("...")` name settings instead.
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and node.args:
            first = node.args[0]
            environ = isinstance(func.value, ast.Attribute) and func.value.attr == "environ"
            if not environ and isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.keys.add((first.lineno, first.col_offset))
        # A test's id and an option's name label what they select; the code they select is
        # judged where it runs (`pytest.param(True, id="flash-cuda-bf16")`, `--use_triton`).
        for k in node.keywords:
            if k.arg == "id" and callee == "param" and isinstance(k.value, ast.Constant):
                self.labels.add((k.value.lineno, k.value.col_offset))
            if k.arg == "ids" and isinstance(k.value, (ast.List, ast.Tuple)):
                self.labels.update((e.lineno, e.col_offset) for e in k.value.elts if isinstance(e, ast.Constant))
        if callee in ("add_argument", "addoption"):
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                    self.labels.add((a.lineno, a.col_offset))
        if isinstance(func, ast.Attribute) and func.attr == "importorskip" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.skips.add((first.lineno, first.col_offset))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        # `__all__ = ["retry_if_cuda_oom"]`: strings naming what the module exports.
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) and isinstance(node.value, (ast.List, ast.Tuple)):
            for e in node.value.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    self.exported.append((e.lineno, e.col_offset, e.value))
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        self.keys.update((k.lineno, k.col_offset) for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        # `{"cuda": "nccl", "neuron": "neuron", ...}` (timm's backend table after CN402): the
        # CUDA row stays for CUDA runs; the port's device has its own row.
        words = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if "neuron" in words:
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "cuda":
                    self.device_tables.add((k.lineno, k.col_offset))
                    if isinstance(v, ast.Constant):  # its value: "nccl" for a backend table
                        self.device_tables.add((v.lineno, v.col_offset))
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        # `state["cuda_rng_state"]` names a field of the program's own data; `os.environ["..."]`
        # names a variable something else reads, which is a setting, not a key.
        environ = isinstance(node.value, ast.Attribute) and node.value.attr == "environ"
        if not environ and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            self.keys.add((node.slice.lineno, node.slice.col_offset))
        self.generic_visit(node)


def _parse(path: Path, project_modules: frozenset[str] = frozenset()) -> tuple[ast.Module, _Names] | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None
    names = _Names()
    names.project_modules = project_modules
    names.visit(tree)
    return tree, names


def _widen(names: _Names, lines: set[int], kernel_lines: set[int]) -> set[int]:
    """The lines a reviewer reads a finding as pointing at: the whole simple statement a finding
    is on (a call spread over lines), the whole decorator a finding is in, the `except ImportError` fallback of a reported import in
    a `try`, and the whole body of a function whose decorator or `def` line a kernel-stack
    finding points at (a `@triton.jit` kernel uses its language on every line)."""
    out = set(lines)
    for stmt in names.statements:
        end = stmt.end_lineno or stmt.lineno
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # A decorator is one expression, however many lines its table takes
            # (`@pytest.mark.parametrize(..., [(..., 'cuda'), (..., 'cuda')])`).
            # A finding on the `def`/`class` line covers its decorators too: one header.
            header_found = stmt.lineno in lines
            for d in stmt.decorator_list:
                span = range(d.lineno, (d.end_lineno or d.lineno) + 1)
                if header_found or any(line in lines for line in span):
                    out.update(span)
            if isinstance(stmt, ast.ClassDef):
                continue
            header = {d.lineno for d in stmt.decorator_list} | {stmt.lineno}
            if header & kernel_lines:
                out.update(range(min(header), end + 1))
            continue
        if isinstance(stmt, ast.Try):
            if any(isinstance(b, (ast.Import, ast.ImportFrom)) and b.lineno in lines for b in stmt.body):
                out.update(range(stmt.lineno, end + 1))
            continue
        if not isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Match)):
            if any(line in lines for line in range(stmt.lineno, end + 1)):
                out.update(range(stmt.lineno, end + 1))
    # `import torch.backends.cudnn as cudnn` ... `cudnn.benchmark = True` (reported): an import
    # whose name is read only where findings point is what those findings ask to change.
    for name, line in names.imported.items():
        uses = names.uses.get(name)
        if uses and uses <= out:
            out.add(line)
    return out


def classify(port: Path, pointed: dict[str, set[int]], stacks: dict[str, set[str]], kernel_lines: dict[str, set[int]]) -> tuple[list[str], list[str]]:
    """(misses, excused): every code line of the port holding a CUDA word that no finding points
    at, and the ones among them that hold no CUDA construct, each with its reason."""
    paths = sorted(port.rglob("*.py"))
    # Any folder or module name of the tree can start an absolute import of the project's own
    # code (`src/lightning/...` is imported as `lightning...`).
    project_modules = frozenset(part for p in paths for part in (*p.relative_to(port).parent.parts, p.stem))
    parsed = {str(p.relative_to(port)): _parse(p, project_modules) for p in paths}
    # Names the project defines anywhere (a helper `_require_cuda` used in other files), minus
    # names bound by an import from outside the project (`selective_scan_cuda`, the extension
    # module, is not the project's; `from fairseq.utils import move_to_cuda` still is).
    defined: set[str] = set()
    foreign: set[str] = set()
    for entry in parsed.values():
        if entry is not None:
            defined |= entry[1].defined
            foreign |= entry[1].foreign
    own = defined - foreign
    # The project's functions and classes with their parameters, and the attributes it assigns:
    # a bare `cuda` is the project's own name where it is one of these (fairseq's
    # `backtranslate_samples(..., cuda=True)`, `self.cuda = torch.cuda.is_available() and ...`).
    params: dict[str, set[str]] = {}
    attrs: set[str] = set()
    markers: set[str] = set()  # pytest markers the project registers (conftest.py)
    members: dict[str, set[str]] = {}
    for entry in parsed.values():
        if entry is not None:
            for cls, names_ in entry[1].members.items():
                members.setdefault(cls, set()).update(names_)
            for callee, names_ in entry[1].params.items():
                params.setdefault(callee, set()).update(names_)
            attrs |= entry[1].attr_stores
            markers |= set(entry[1].markers)
    modules = {".".join(Path(rel).with_suffix("").parts[: -1 if Path(rel).stem == "__init__" else None]) for rel in parsed}
    module_parts = {part for m in modules for part in m.split(".")}
    misses: list[str] = []
    excused: list[str] = []
    for rel, entry in parsed.items():
        names = entry[1] if entry is not None else _Names()
        lines = _widen(names, pointed.get(rel, set()), kernel_lines.get(rel, set()))
        reported_imports = {name for name, line in names.imported.items() if line in lines}
        own_names, own_paths = _own_bare_names(rel, names, params, attrs, own, modules, markers, members)
        for line, tokens in _code_lines(port / rel).items():
            if line in lines:
                continue
            reasons = []
            for tok in tokens:
                word = tok.string
                own_reason = _own_reason(tok, own_names, own_paths)
                if own_reason is not None:
                    reasons.append(f"{word}: {own_reason}")
                elif any(s in word.lower() for s in stacks.get(rel, ())) and not re.search(r"cuda|nccl|cudnn", word, re.IGNORECASE):
                    reasons.append(f"{word}: kernel language of a reported file")
                elif tok.type == tokenize.NAME and word in reported_imports and not tok.line[: tok.start[1]].rstrip().endswith("."):
                    reasons.append(f"{word}: bound by a reported import")
                elif tok.type == tokenize.NAME and word in own and not _BARE.fullmatch(word):
                    reasons.append(f"{word}: a name the project defines")
                elif tok.type == tokenize.STRING and _names_own(word, own, module_parts):
                    reasons.append(f"{word}: a name the project defines, as a string")
                elif tok.type == tokenize.STRING and _fstring_own(word, own):
                    reasons.append(f"{word}: a name the project defines, in an f-string's placeholder")
                elif tok.type == tokenize.STRING and tok.start in names.device_tables:
                    reasons.append(f"{word}: the CUDA row of a device table that has the port's row")
                elif tok.type == tokenize.STRING and tok.start in names.skips:
                    reasons.append(f"{word}: a test skipped where the package is absent")
                elif tok.type == tokenize.STRING and _byte_start(tok) in names.labels:
                    reasons.append(f"{word}: a label (a test id or a command-line option's name)")
                elif _TRITON_CLIENT.search(word):
                    reasons.append(f"{word}: NVIDIA Triton Inference Server's network client, not the Triton language")
                elif tok.type == tokenize.NAME and not _BARE.fullmatch(word) and _attribute_root(tok) in reported_imports - {"torch"}:
                    reasons.append(f"{word}: reached through a reported import")
                elif tok.type == tokenize.STRING and tok.start in names.keys and not _BARE.fullmatch(word.strip("'\"")):
                    reasons.append(f"{word}: a key of the program's own data")
                else:
                    reasons.append("")
            words = " ".join(t.string for t in tokens)
            if all(reasons):
                excused.append(f"{rel}:{line}: {'; '.join(reasons)}")
            else:
                misses.append(f"{rel}:{line}: {words}")
    return misses, excused


# `import tritonclient.grpc`, `check_requirements("tritonclient[all]")`: a client of a model
# server reached over the network; nothing of it runs kernels in this process.
_TRITON_CLIENT = re.compile(r"\btritonclient\b")


def _fstring_own(token: str, own: set[str]) -> bool:
    """``f"{cuda_profile_dir}/kernels_*.csv"``: the CUDA words sit only in placeholders, and
    each is a name the project defines (never the bare word ``cuda``)."""
    m = _FSTRING.match(token)
    if m is None:
        return False
    body = m.group(3)
    if WORDS.search(re.sub(r"\{[^{}]*\}", "", body)):
        return False
    worded = [w for expr in re.findall(r"\{([^{}]*)\}", body) for w in re.findall(r"[A-Za-z_]\w*", expr) if WORDS.search(w)]
    return bool(worded) and all(w in own and not _BARE.fullmatch(w) for w in worded)


_FSTRING = re.compile(r"""([rRbBuU]?[fF][rRbBuU]?)('''|\"\"\"|'|")(.*)\2$""", re.S)


def _byte_start(tok: tokenize.TokenInfo) -> tuple[int, int]:
    """A token's start as ast counts it: (line, UTF-8 byte column)."""
    return tok.start[0], len(tok.line[: tok.start[1]].encode("utf-8"))


def _attribute_root(tok: tokenize.TokenInfo) -> str | None:
    """``bnb`` for the ``triton_based_modules`` of ``bnb.nn.triton_based_modules``: the name a
    dotted chain starts from, when the token is an attribute in it."""
    m = re.search(r"([A-Za-z_]\w*)(?:\s*\.\s*[A-Za-z_]\w*)*\s*\.\s*$", tok.line[: tok.start[1]])
    return m.group(1) if m else None


def _names_own(token: str, own: set[str], module_parts: set[str]) -> bool:
    """A string that spells the project's own names (``monkeypatch.setattr(mod,
    "has_cuda_capability", ...)``, the annotation ``"CUDAGraphWrapper"``,
    ``patch("pkg.cudagraph.utils.device_type", ...)``): each dotted part with a CUDA word is a
    name the project defines (never the bare word `cuda`) or one of its modules."""
    value = token.strip("rbuRBUfF").strip("'\"")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", value):
        return False
    worded = [part for part in value.split(".") if WORDS.search(part)]
    return bool(worded) and all(
        (part in own and not _BARE.fullmatch(part)) or part in module_parts for part in worded
    )


def _own_bare_names(
    rel: str, names: _Names, params: dict[str, set[str]], attrs: set[str], own: set[str], modules: set[str],
    markers: set[str] = frozenset(), members: dict[str, set[str]] | None = None,
) -> tuple[dict[tuple[tuple[int, int], str], str], dict[int, set[str]]]:
    """The tokens of one module that spell a project's own name although the word alone is an
    API (`cuda`): ((line, byte col), token) -> reason, and line -> the module-path parts of a
    `from` import of the project's own module on that line.

    Own: a parameter of the project's function and its reads there; a keyword argument passed to
    the project's function or class that has that parameter (not `cuda=` passed to a library); an
    attribute the project assigns on `self`, read there without a call (`self.cuda`, never
    `x.cuda()`, `self.cuda()` or `torch.cuda`); a string of `__all__` naming a project's def;
    a part of the module path in `from lightning.fabric.accelerators.cuda import ...`, when that
    path is a module of the tree."""
    out: dict[tuple[tuple[int, int], str], str] = {}
    for where in names.param_names:
        out[where, ""] = "a parameter of the project's function"
    for where in names.local_names:
        out[where, ""] = "a variable of the project's function"
    for name, places in names.markers.items():
        for where in places:
            for quote in ('"', "'"):
                out[where, f"{quote}{name}{quote}"] = "a pytest marker the project registers"
    for line, col, name in names.marker_uses:
        if name in markers:
            out[(line, col), name] = "a pytest marker the project registers"
    for line, col, callee, keyword in names.keywords:
        if callee not in names.foreign and keyword in params.get(callee, ()):
            out[(line, col), keyword] = f"a keyword of the project's {callee}()"
    for line, col, attr in names.attr_reads:
        if attr in attrs:
            out[(line, col), attr] = "an attribute the project assigns"
    for where in names.member_defs:
        out[where, ""] = "a member the project's class defines"
    for line, col, cls, attr in names.member_reads:
        if cls not in names.foreign and attr in (members or {}).get(cls, ()):
            out[(line, col), attr] = f"a member of the project's class {cls}"
    # `args.cuda` where `class Args: cuda: bool = True` (cleanrl's tyro arguments): a field of the
    # project's own class read off an instance, never called (`x.cuda()` is the API).
    fields = {name for names_ in (members or {}).values() for name in names_}
    for line, col, receiver, attr in names.field_reads:
        if receiver not in names.foreign and attr in fields:
            out.setdefault(((line, col), attr), "a field of the project's class")
    for line, col, value in names.exported:
        if value in own:
            for quote in ('"', "'"):
                out[(line, col), f"{quote}{value}{quote}"] = "a name the module exports"
    paths: dict[int, set[str]] = {}
    package = Path(rel).parent.parts
    for line, (level, *parts) in names.own_import_paths:
        base = package[: len(package) - level + 1] if level else ()
        dotted = ".".join((*base, *parts))
        if any(m == dotted or m.endswith("." + dotted) for m in modules):
            paths.setdefault(line, set()).update(parts)
    return out, paths


def _own_reason(tok: tokenize.TokenInfo, own_names: dict, paths: dict[int, set[str]]) -> str | None:
    if tok.type != tokenize.NAME:
        return own_names.get(((tok.start[0], len(tok.line[: tok.start[1]].encode("utf-8"))), tok.string))
    where = (tok.start[0], len(tok.line[: tok.start[1]].encode("utf-8")))
    if not _BARE.fullmatch(tok.string):
        # `use_cuda`, `move_to_cuda`: a name the project defines, decided by `own`; a marker the
        # project registers is its own name only in `pytest.mark.<name>`; `triton_utils` in
        # `from .triton_utils.mixin import ...`: a module of the tree.
        return own_names.get((where, tok.string)) or _own_module_part(tok, paths)
    reason = own_names.get((where, tok.string)) or own_names.get((where, ""))
    return reason or _own_module_part(tok, paths)


def _own_module_part(tok: tokenize.TokenInfo, paths: dict[int, set[str]]) -> str | None:
    """A part of the module path of a `from` import of the project's own module."""
    if tok.string in paths.get(tok.start[0], ()):
        before = tok.line[: tok.start[1]]
        if re.match(r"\s*from\s", before) and not re.search(r"\bimport\b", before):
            return "a module of the project"
    return None


def audit(project: Path, target: str, keep: Path | None) -> dict:
    if keep is not None:
        return _audit(project, target, keep)
    # The port of a large tree is hundreds of MB: a temporary one goes when the audit ends.
    with tempfile.TemporaryDirectory(prefix="audit-port-") as work:
        return _audit(project, target, Path(work))


def _audit(project: Path, target: str, work: Path) -> dict:
    port = work / project.name
    migrated = _run("migrate", str(project), "--out", str(port), "--target", target, "--report", str(work / "migrate.json"), "-q")
    if migrated.returncode not in (0, 1):
        raise SystemExit(f"migrate failed ({migrated.returncode}): {migrated.stderr[-2000:]}")
    report = json.loads((work / "migrate.json").read_text())
    checked = _run("check", str(port), "--target", target, "--output-format", "json")
    remaining = json.loads(checked.stdout)
    pointed: dict[str, set[int]] = {}
    stacks: dict[str, set[str]] = {}  # file -> kernel stacks a finding names
    kernel_lines: dict[str, set[int]] = {}  # file -> lines of findings that name a kernel stack
    for f in remaining.get("manual_actions", []) + remaining.get("fixable", []) + remaining.get("edits", []):
        rel = str(Path(f["path"]).resolve().relative_to(port.resolve()))
        span = range(f["line"], f.get("end_line", f["line"]) + 1)
        pointed.setdefault(rel, set()).update(span)
        text = (f["message"] + " " + f.get("guidance", "")).lower()
        named = {s for s in STACKS if s in text}
        stacks.setdefault(rel, set()).update(named)
        if named:
            kernel_lines.setdefault(rel, set()).update(span)
    misses, excused = classify(port, pointed, stacks, kernel_lines)
    summary = report.get("summary", {})
    return {
        "project": project.name,
        "target": target,
        "files": summary.get("files_scanned"),
        "changed": summary.get("files_changed"),
        "edits": len(report.get("edits", [])),
        "manual": len(report.get("manual_actions", [])),
        "failed": len(report.get("failures", [])),
        "silent_miss_lines": len(misses),
        "misses": misses,
        "excused_lines": len(excused),
        "excused": excused,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("project", type=Path)
    parser.add_argument("--target", default="neuron", choices=("neuron", "accelerator"))
    parser.add_argument("--keep", type=Path, help="write the port and reports here instead of a temp folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--excused", action="store_true", help="also list the lines counted as no construct, with the reason")
    args = parser.parse_args()
    result = audit(args.project.resolve(), args.target, args.keep)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['project']} ({result['target']}): {result['files']} files, {result['changed']} changed, "
        f"{result['edits']} edits, {result['manual']} manual actions, {result['failed']} failed, "
        f"{result['silent_miss_lines']} CUDA lines no finding points at, "
        f"{result['excused_lines']} lines with CUDA words but no construct"
    )
    for miss in result["misses"]:
        print("  " + miss)
    if args.excused:
        print("no construct:")
        for line in result["excused"]:
            print("  " + line)


if __name__ == "__main__":
    main()
