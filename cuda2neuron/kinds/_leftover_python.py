"""Why a CUDA word left in Python code is no CUDA construct: the excuses of the residual pass.

After every rule has run, a line of code that still names CUDA and that no finding covers is
reported (CN902, ``kinds/_residual.py``) — unless each of its CUDA words is provably something
else. That judgement is shared with ``bench/audit_port.py`` (the audit measures silent misses
with it), so the product and the measurement never disagree. An excuse is one of:

* a name the project defines (``def _require_cuda()``, ``torch_cuda_version = ...``), also
  spelled as a string (``setattr(mod, "has_cuda_capability", ...)``, an annotation
  ``"CUDAGraphWrapper"``, a dotted path through the project's modules); the bare word ``cuda``
  only where it is provably the project's: a parameter of its function and the reads of it, a
  keyword passed to its own function or class that has that parameter, a ``self.cuda`` field it
  assigns, a field of its class read off an instance and never called, a variable a function
  assigns, a string of ``__all__`` naming its def, a part of a ``from`` path that is its own
  module, a pytest marker it registers;
* a name bound by a reported import, or an attribute reached through one (never ``torch``);
* a string used as a key of the program's own data (``ckpt["cuda_rng_state"]``; not
  ``os.environ[...]``), the ``"cuda"`` row of a device table that has a ``"neuron"`` row;
* a device a test writes into a parser or constructor and asserts back
  (``parse_args(["--model_args", "device=cuda"])`` ... ``== {"device": "cuda"}``; the decision
  is ``rules/_shared/round_trip.py``'s, shared with CN102/CN103/CN109);
* a word or pattern looked for in a text: one read from a file or from source, what a program
  printed (pytest's ``capsys.readouterr().out``), an exception's message (``str(e)``), or a line of
  a log searched for a list of markers that holds a phrase;
* the package of a ``pytest.importorskip(...)``, a label (a test id, a command-line option's
  name, the name ``spec_from_file_location`` loads a file under), NVIDIA Triton Inference Server's network client (``tritonclient``), the kernel
  language of a file whose kernels are reported, a model repository of NVIDIA's organisation
  on the Hugging Face Hub (``"nvidia/Cosmos-Predict2.5-2B"``; never ``nvidia/cuda``), the name
  of a data, log or report file or of a project's script (``"reports/tests_cuda_stats.txt"``),
  a web page's address, the name of a web service's credential or endpoint (``NVIDIA_API_KEY``),
  and a name whose CUDA letters cross from one word into the next (``AsyncClient``).

What a finding covers is widened as a reviewer reads it (``widen``): the whole statement, the
whole decorator, the ``except ImportError`` fallback of a reported import, an import whose name
is read only where findings point, a kernel's whole body.

The names a project defines are collected per file (``Names``) and pooled (``ProjectNames``):
the audit pools the whole tree; the residual pass pools the one file it reads, with the
project's top-level packages (``ProjectFacts.own_packages``) standing in for the tree's modules
and the CUDA-worded names the tree defines or imports from outside, which the project sweep
pools from the bytes it reads (``ProjectFacts.own_names`` / ``foreign_names``,
``_project_names``).
Only the standard library's ``ast`` is used: no parser of ours is loaded (the round-trip
decision, ``rules/_shared/round_trip.py``, is ``ast`` too; importing it loads the rule package,
so it is imported only when a test function of a file that names "cuda" is met).
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from cuda2neuron.core import WORD_BYTES, once_bound_calls, text_callees

__all__ = [
    "AUDIT_WORDS",
    "RESIDUAL_WORDS",
    "Names",
    "ProjectNames",
    "Word",
    "code_words",
    "excuse",
    "is_file_name",
    "is_hub_id",
    "is_web_address",
    "parse_names",
    "plainly_own",
    "widen",
]

# The residual pass looks for what issue-level "names CUDA" means: CUDA, NCCL, cuDNN, NVIDIA,
# nvcc (never our own name, cuda2neuron). The audit looks wider: the kernel languages too.
RESIDUAL_WORDS = re.compile(rb"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc", re.IGNORECASE)
AUDIT_WORDS = re.compile(
    rb"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc|triton|tilelang|cutlass|helion|_scaled_mm|float8|\bcupy\b", re.IGNORECASE
)
_WORDS_STR = re.compile(r"cuda(?!2neuron)|nccl|cudnn|nvidia|nvcc|triton|tilelang|cutlass|helion|_scaled_mm|float8|\bcupy\b", re.IGNORECASE)
# A bare word is the API itself (`x.cuda()`, `torch.version.cuda`, `"nccl"`): never excused as a
# name of the project's, even where the project also defines something of that name.
_BARE = re.compile(r"_*(?:cuda|nccl|cudnn|triton|tilelang|cutlass|helion|cupy|nvidia)_*", re.IGNORECASE)
_CUDA_WORD = re.compile(r"cuda|nvcc|nvidia|cudnn|nccl", re.IGNORECASE)
# Calls that build a filesystem path from their string arguments (`join` only as os.path's).
_PATH_BUILDERS = frozenset({"join", "Path", "PurePath", "PosixPath", "joinpath", "makedirs", "mkdir"})
NAME, STRING = "NAME", "STRING"


@dataclass(frozen=True)
class Word:
    """A code token holding a CUDA word: an identifier run or a whole string literal.

    ``start`` is (line, UTF-8 byte column), as ``ast`` counts; ``before`` the line's text before it.
    """

    type: str
    string: str
    start: tuple[int, int]
    before: str
    end_line: int = 0

    @property
    def line(self) -> int:
        return self.start[0]


class Names(ast.NodeVisitor):
    """What a module defines and imports, and the shape of the code around a token."""

    def __init__(self) -> None:
        self.defined: set[str] = set()  # functions, classes, parameters, variables, attributes
        self.imported: dict[str, int] = {}  # bound name -> line of its import
        self.foreign: set[str] = set()  # bound names imported from outside the project
        self.own_imported: set[str] = set()  # bound names imported from the project's own modules
        self.project_modules: frozenset[str] = frozenset()  # top-level names of the project's own modules
        self.keys: set[tuple[int, int]] = set()  # (line, col) of strings used as mapping keys
        self.uses: dict[str, set[int]] = {}  # name -> lines where it is read
        self.statements: list[ast.stmt] = []
        self.skips: set[tuple[int, int]] = set()  # (line, col) of `pytest.importorskip("pkg")` names
        # (line, col) of a folder or file name the program builds a path from:
        # `os.path.join(tempfile.gettempdir(), "cnn_cuda_example")`, `Path(root, "nvidia_docs")`.
        self.path_parts: set[tuple[int, int]] = set()
        # (line, col) of labels: a test id (`pytest.param(..., id="cuda-bf16")`, `ids=[...]`) and
        # the name of a command-line option (`add_argument("--use_triton")`, `addoption("--cuda_ver")`)
        self.labels: set[tuple[int, int]] = set()
        # (line, col) of the strings a `Literal[...]` type lists (`accelerator: Literal["cpu", "cuda"]`):
        # accepted values, not chosen ones; the value passed is judged where it is written.
        self.type_values: set[tuple[int, int]] = set()
        # (line, col) of a vendor's name held by a field that names an organisation or a hosted
        # service (`hf_config=dict(org="nvidia", ...)`, `api["api_type"] == "nvidia"`): NVIDIA the
        # company (a Hub namespace, an inference API), not its GPUs.
        self.vendor_names: set[tuple[int, int]] = set()
        # (line, col) of environment variables' names listed among other names (trl's
        # `_CHILD_ENV_TO_STRIP = ("RANK", ..., "NCCL_DEBUG_FILE")`): a list of names sets no value.
        self.env_name_lists: set[tuple[int, int]] = set()
        # (line, col) of words looked for in an exception's text (`any(k in str(e).lower() for k in
        # ["outofmemoryerror", "cuda", "memory"])` under `except ... as e`): a message's word.
        self.error_words: set[tuple[int, int]] = set()
        # (line, col) of pieces of source text a test searches for (`"torch.version.cuda" in line`,
        # `setup_src.find("_cuda_driver_max_version()")`): code as data, spelled with code's
        # punctuation; a bare value searched for (`"cuda" in str(device)`) stays a device test.
        self.needles: set[tuple[int, int]] = set()
        # Per enclosing function, its names bound once to a text the program read from a file or
        # from source (`content = SETUP_SH.read_text()`, `src = inspect.getsource(f)`): a word
        # looked for in one (`assert "CUDA_VISIBLE_DEVICES" in content`) is that text's, a needle.
        self._texts: list[frozenset[str]] = []
        # Per enclosing function, its names bound once to a literal list, tuple or set.
        self._literals: list[dict[str, ast.List | ast.Tuple | ast.Set]] = []
        # (line, col) of device strings a test writes into a parser or constructor and asserts
        # back (`parse_args(["--model_args", "device=cuda"])` ... `== {"device": "cuda"}`): test
        # data; `rules/_shared/round_trip` decides, for CN102/CN103/CN109 as for this pass.
        self.test_data: set[tuple[int, int]] = set()
        self.round_trips = False  # set by parse_names when the module names "cuda"
        self._qualify = None
        # Per function, the names bound once to a call, with the callee's last name; and the
        # module's calls whose result is a text (``text_callees``), found when first asked.
        self._calls: list[dict[str, str]] = []
        self._text_callees: frozenset[str] | None = None
        self.tree: ast.Module | None = None
        self._handler_names: set[str] = set()
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
        # Whether a bare word (`cuda`, `nccl`) may be a variable of the module: set by parse_names.
        self.bare_names = True
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
            # `def _host(**fields)`: a keyword of any name is the function's (`_VAR_KEYWORDS`).
            taken = params | ({_VAR_KEYWORDS} if args.kwarg is not None else set())
            self.defined.add(node.name)
            self.params.setdefault(node.name, set()).update(taken)
            if node.name == "__init__" and self._classes:
                # `BacktranslationDataset(..., cuda=True)` passes the parameter of its __init__.
                self.params.setdefault(self._classes[-1], set()).update(taken)
        self._scopes.append(params)
        # `cuda = torch.device("neuron")` in a test's setUp (torchtitan): a bare word the function
        # assigns is its local variable everywhere in it (Python's scoping), unless declared global.
        body = node.body if isinstance(node.body, list) else [node.body]
        if self.bare_names:
            declared = {n for b in body for sub in ast.walk(b) if isinstance(sub, (ast.Global, ast.Nonlocal)) for n in sub.names}
            assigned = {
                sub.id for b in body for sub in ast.walk(b)
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and _BARE.fullmatch(sub.id)
            }
        else:
            # No bare word is a name anywhere in the module: no function can assign one (the
            # walks above cost more than the rest of the visit on a large module).
            declared = assigned = set()
        self._locals.append(assigned - declared - params)
        self._texts.append(_texts_read(body))
        self._literals.append(_literal_lists(body))
        self._calls.append(once_bound_calls(body))
        if self.round_trips and self.tree is not None and not isinstance(node, ast.Lambda) and node.name.startswith("test"):
            self._round_trip(node)
        self.generic_visit(node)
        self._texts.pop()
        self._literals.pop()
        self._calls.pop()
        self._locals.pop()
        self._scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def _round_trip(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Deferred: the rule catalog (and libcst) loads only where a test names a CUDA device.
        from cuda2neuron.rules._shared.round_trip import module_params, module_qualifier, round_trip_strings

        if self._qualify is None:
            self._qualify = (module_qualifier(self.tree), module_params(self.tree))
        self.test_data |= round_trip_strings(node, *self._qualify)

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
        elif isinstance(node.value, ast.Attribute) and (
            _chain_root(node.value) not in self.foreign or node.value.attr[:1].isupper()
        ):
            # `stack_mod.DeviceType.CUDA`: a member of a class reached through a module (unsloth's
            # tests import `utils.hardware.hardware as hw`, a folder of theirs the per-file pass
            # cannot tell from a package); through an import from outside only a class spelled
            # as one, never `torch.backends.cudnn`.
            where = (node.end_lineno or node.lineno, (node.end_col_offset or 0) - len(node.attr.encode("utf-8")))
            self.member_reads.append((*where, node.value.attr, node.attr))
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
            else:
                # `import _zoo_aggressive_cuda_spoof as spoof` (unsloth's tests): a module of the
                # project's own, found beside the file, named as `from own.mod import` names it.
                self.own_import_paths.append((node.lineno, (0, *alias.name.split("."))))
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
            elif alias.name != "*":
                # Defined in a module of the project: its own name, even where that module
                # is not read with this one (the residual pass reads one file at a time).
                self.own_imported.add(bound)
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
        # `re.search(r"_CUDA_TORCH_PKG_SPEC...", stack)` where `stack = path.read_text()`: a
        # pattern looked for in a file's text (unsloth's parity tests), like `"..." in stack`.
        if (
            callee in _PATTERN_SEARCHES and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "re" and len(node.args) >= 2 and isinstance(node.args[1], ast.Name)
            and self._texts and node.args[1].id in self._texts[-1]
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
        ):
            self.needles.add((node.args[0].lineno, node.args[0].col_offset))
        # `spec_from_file_location("_zoo_aggressive_cuda_spoof", path)` (unsloth's tests): the
        # name a file is loaded under, a label; the file's code is judged where it is written.
        if callee == "spec_from_file_location" and node.args and isinstance(node.args[0], ast.Constant):
            self.labels.add((node.args[0].lineno, node.args[0].col_offset))
        if callee in ("add_argument", "addoption"):
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                    self.labels.add((a.lineno, a.col_offset))
        if callee in _PATH_BUILDERS and not (callee == "join" and not _is_os_path(func)):
            self._path_parts(node)
        if isinstance(func, ast.Attribute) and func.attr in _SEARCHES and node.args and _is_code_text(node.args[0]):
            self.needles.add((node.args[0].lineno, node.args[0].col_offset))
        if isinstance(func, ast.Attribute) and func.attr == "importorskip" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                self.skips.add((first.lineno, first.col_offset))
        self.generic_visit(node)

    def _path_parts(self, node: ast.Call) -> None:
        """The string parts of a path built by ``node``, unless a part reaches into a CUDA install
        (`os.path.join(CUDA_HOME, "bin", "nvcc")`: another argument names CUDA)."""
        parts = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        others = [a for a in node.args if a not in parts]
        if any(_CUDA_WORD.search(ast.unparse(a)) for a in others):
            return
        for part in parts:
            if not part.value.startswith(("/", "~", "$")) and not _BARE.fullmatch(part.value):
                self.path_parts.add((part.lineno, part.col_offset))

    def visit_Assign(self, node: ast.Assign) -> None:
        # `__all__ = ["retry_if_cuda_oom"]`: strings naming what the module exports.
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) and isinstance(node.value, (ast.List, ast.Tuple)):
            for e in node.value.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, str):
                    self.exported.append((e.lineno, e.col_offset, e.value))
        # `__contact_names__ = "NVIDIA"` (Megatron's package_info.py): who to write to, not a GPU.
        for target in node.targets:
            if isinstance(target, ast.Name):
                self._vendor(target.id.strip("_"), node.value)
        self.generic_visit(node)

    def _vendor(self, field: str | None, value: ast.expr) -> None:
        if field is not None and field.lower() in _VENDOR_FIELDS and isinstance(value, ast.Constant):
            if isinstance(value.value, str) and value.value.lower() == "nvidia":
                self.vendor_names.add((value.lineno, value.col_offset))

    def _names_list(self, node: ast.List | ast.Tuple | ast.Set) -> None:
        values = [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(values) < 2 or len(values) != len(node.elts) or not all(_ENV_VAR_NAME.fullmatch(v.value) for v in values):
            return
        cuda = [v for v in values if RESIDUAL_WORDS.search(v.value.encode())]
        if len(cuda) == len(values) or any("_" not in v.value for v in cuda):
            return  # only CUDA's variables, or a bare word (`["CPU", "CUDA"]`): settings or devices, not names
        self.env_name_lists.update((v.lineno, v.col_offset) for v in values)

    def visit_List(self, node: ast.List) -> None:
        self._names_list(node)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._names_list(node)
        self.generic_visit(node)

    def visit_Set(self, node: ast.Set) -> None:
        self._names_list(node)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._handler_names.add(node.name)
        self.generic_visit(node)

    def _searched_words(self, node: ast.GeneratorExp | ast.ListComp | ast.SetComp) -> None:
        # `k in <text of a caught exception>` for k over a literal list: the list holds words of messages.
        # So does a list (written there, or bound once in the function) that holds a phrase
        # (`gpu_markers = ("cuda", "rocm", "device memory")`, `any(m in line for m in gpu_markers)`,
        # unsloth's llama-server log reader): a blank is in no device's or variable's name, so
        # what the list is searched in is a text, and its words are markers of that text.
        elt = node.elt
        if not (isinstance(elt, ast.Compare) and len(elt.ops) == 1 and isinstance(elt.ops[0], ast.In)):
            return
        for gen in node.generators:
            if not (isinstance(gen.target, ast.Name) and isinstance(elt.left, ast.Name) and elt.left.id == gen.target.id):
                continue
            haystack = {n.id for n in ast.walk(elt.comparators[0]) if isinstance(n, ast.Name)}
            items = gen.iter
            if isinstance(items, ast.Name) and self._literals:
                items = self._literals[-1].get(items.id)
            if not isinstance(items, (ast.List, ast.Tuple, ast.Set)):
                continue
            words = [e for e in items.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            phrases = len(words) == len(items.elts) and any(" " in w.value.strip() for w in words)
            if (haystack & self._handler_names and items is gen.iter) or phrases:
                self.error_words.update((e.lineno, e.col_offset) for e in words)

    def visit_For(self, node: ast.For) -> None:
        # `for k in ("torch", "torch_cuda", "triton"): assert k in fp` (unsloth's fingerprint
        # test): a loop whose variable is only ever a key (`k in fp`, `fp[k]`) walks keys.
        if isinstance(node.target, ast.Name) and isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)):
            items = node.iter.elts
            if items and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items):
                if _only_keys(node.target.id, node.body):
                    self.keys.update((e.lineno, e.col_offset) for e in items)
        self.generic_visit(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._searched_words(node)
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._searched_words(node)
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        self._vendor(node.arg, node.value)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if isinstance(node.ops[0], (ast.In, ast.NotIn)) and (_is_code_text(node.left) or self._in_text_read(node)):
            self.needles.add((node.left.lineno, node.left.col_offset))
        sides = [node.left, *node.comparators]
        fields = [_field_name(side) for side in sides]
        for side in sides:
            for field in fields:
                self._vendor(field, side)
        # `owner("NVIDIA/Nemotron") == "NVIDIA"` (unsloth's consent-gate tests): what a call
        # answers for one of NVIDIA's Hub repositories, compared with the organisation's name.
        if any(_hands_hub_id(side) for side in sides):
            for side in sides:
                self._vendor("owner", side)
        self.generic_visit(node)

    def _in_text_read(self, node: ast.Compare) -> bool:
        right = node.comparators[0]
        if isinstance(right, ast.Attribute) and right.attr in _CAPTURED:
            # `"CUDA" in captured.out` (`captured = capfd.readouterr()`), `in capsys.readouterr().err`
            head = right.value
            right = head if isinstance(head, ast.Name) else None
            if isinstance(head, ast.Call) and _callee_name(head.func) == "readouterr":
                return isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
            if right is None:
                return False
        if not (
            bool(self._texts)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and isinstance(right, ast.Name)
        ):
            return False
        if right.id in self._texts[-1]:
            return True
        callee = self._calls[-1].get(right.id)
        if callee is None or self.tree is None:
            return False
        if self._text_callees is None:
            self._text_callees = text_callees(self.tree)
        return callee in self._text_callees

    def visit_Dict(self, node: ast.Dict) -> None:
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                self._vendor(k.value, v)
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
        head = node.value
        if (head.id if isinstance(head, ast.Name) else head.attr if isinstance(head, ast.Attribute) else None) == "Literal":
            values = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            self.type_values.update((v.lineno, v.col_offset) for v in values if isinstance(v, ast.Constant))
        self.generic_visit(node)



# str methods that look for their argument in a text.
_SEARCHES = frozenset({"find", "rfind", "index", "rindex", "count"})
# Code's punctuation in a searched-for string: a dotted name, a call, a line's end. Not `=`:
# `"GPU_BACKEND=cuda" in output` and `"-DGGML_CUDA=ON" not in output` look for what an installer
# chose in what it printed, a CUDA setting (nor a version's dot: `"NVCC_VER=12.8"`).
# A string literal as source spells it, quotes included (`'"cuda"' in source[...]`, unsloth's
# installer tests): only source text holds the quotes, a device's name never does.
_CODE_TEXT = re.compile(r"[A-Za-z_]\w*\.[A-Za-z_]|\w\(|\)|\n|\A([\"'])[^\"']*\1\Z")


# What reads a file's or a function's text: pathlib's `read_text`, inspect's `getsource`; and
# what a program printed, as pytest's capsys / capfd fixtures give it back (`readouterr()`, its
# `.out` / `.err`): `assert "CUDA" in captured.out` looks for a word in a log, nothing runs.
_TEXT_READS = frozenset({"read_text", "getsource", "readouterr"})
_CAPTURED = frozenset({"out", "err"})
# An exception's links and parts: a name read through one of them holds an exception, whose
# `str()` is a message (`message = str(current)` while walking `current.__cause__`).
_EXCEPTION_PARTS = frozenset({"__cause__", "__context__", "__traceback__"})
# `re` functions whose second argument is the text the pattern is looked for in.
_PATTERN_SEARCHES = frozenset({"search", "match", "fullmatch", "findall", "finditer"})


def _texts_read(body: list[ast.stmt]) -> frozenset[str]:
    """The names ``body`` binds exactly once, and to a text read by a call in ``_TEXT_READS``
    (``content = path.read_text()``), or to a slice of such a name (``func_body =
    source[start:end]``, unsloth's installer tests): any other binding of the name may hold
    anything."""
    bound: dict[str, int] = {}
    texts: set[str] = set()
    slices: dict[str, str] = {}  # name -> the name it slices
    errors = _exception_names(body)
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            value = node.value
            if isinstance(value, ast.Attribute) and value.attr in _CAPTURED:
                value = value.value  # `out = capsys.readouterr().out`
            if isinstance(value, ast.Call) and _callee_name(value.func) in _TEXT_READS:
                texts.add(node.targets[0].id)
            elif _is_message(value, errors):
                texts.add(node.targets[0].id)
            elif isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and isinstance(value.value, ast.Name):
                slices[node.targets[0].id] = value.value.id
    texts |= {name for name, whole in slices.items() if whole in texts}
    return frozenset(n for n in texts if bound.get(n) == 1)


def _literal_lists(body: list[ast.stmt]) -> dict[str, ast.List | ast.Tuple | ast.Set]:
    """The names ``body`` binds exactly once, to a literal list, tuple or set."""
    bound: dict[str, int] = {}
    lists: dict[str, ast.List | ast.Tuple | ast.Set] = {}
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
            if (
                isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.List, ast.Tuple, ast.Set))
            ):
                lists[node.targets[0].id] = node.value
    return {n: v for n, v in lists.items() if bound.get(n) == 1}


def _exception_names(body: list[ast.stmt]) -> frozenset[str]:
    """The names ``body`` holds exceptions in: an ``except ... as e`` name, and a name whose
    ``__cause__`` / ``__context__`` / ``__traceback__`` it reads (``current.__cause__``,
    ``getattr(current, "__context__", None)``)."""
    out: set[str] = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.ExceptHandler) and node.name:
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and node.attr in _EXCEPTION_PARTS and isinstance(node.value, ast.Name):
                out.add(node.value.id)
            elif (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Name)
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in _EXCEPTION_PARTS
            ):
                out.add(node.args[0].id)
    return frozenset(out)


def _is_message(value: ast.expr, errors: frozenset[str]) -> bool:
    """``str(e)`` / ``repr(e)`` of a name holding an exception: its message, a text."""
    return (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("str", "repr")
        and len(value.args) == 1 and isinstance(value.args[0], ast.Name) and value.args[0].id in errors
    )


def _callee_name(func: ast.expr) -> str | None:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _only_keys(name: str, body: list[ast.stmt]) -> bool:
    """Whether ``name`` is read in ``body`` and only as a key: a subscript's index or what
    ``in`` / ``not in`` looks for."""
    keys: set[int] = set()
    uses: list[ast.Name] = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name):
                keys.add(id(node.slice))
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and all(
                isinstance(op, (ast.In, ast.NotIn)) for op in node.ops
            ):
                keys.add(id(node.left))
            elif isinstance(node, ast.Name) and node.id == name:
                uses.append(node)
    return bool(uses) and all(id(u) in keys for u in uses)


def _is_code_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and _CODE_TEXT.search(node.value) is not None


def _chain_root(node: ast.expr) -> str | None:
    """``a`` for ``a.b.c``; None when the chain starts elsewhere (a call, a subscript)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_os_path(func: ast.expr) -> bool:
    """``os.path.join`` / ``path.join`` / ``osp.join``, not ``", ".join`` or a library's join."""
    value = func.value if isinstance(func, ast.Attribute) else None
    return (isinstance(value, ast.Attribute) and value.attr == "path") or (isinstance(value, ast.Name) and value.id in ("path", "osp"))


def widen(names: Names, lines: set[int], kernel_lines: set[int]) -> set[int]:
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




_STRING_TOKEN = re.compile(
    rb"""\"\"\"[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*\"\"\"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"""
    rb"""|"[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*"|'[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*'""",
    re.DOTALL,
)
_PREFIX = frozenset(b"rRbBuUfF")


@lru_cache(maxsize=4)
def _lowered_pattern(words: re.Pattern[bytes]) -> re.Pattern[bytes]:
    return re.compile(words.pattern, words.flags & ~re.IGNORECASE)


def code_words(
    code: bytes, words: re.Pattern[bytes] = RESIDUAL_WORDS, source: bytes | None = None, skip_lines: set[int] = frozenset()
) -> dict[int, list[Word]]:
    """Line -> the code tokens of ``code`` that hold a CUDA word (none on ``skip_lines``).

    ``code`` is ``source`` with its comments and docstrings blanked (``_code_text``: offsets
    kept, but a docstring's newlines blanked too, so lines are counted in ``source``); a string
    with a space is prose (a log or error message), not a device name or a module, and is left
    out. A plain scan instead of ``tokenize`` (which costs about a libcst parse on 3.11).
    """
    source = code if source is None else source
    found = []
    line, pos = 1, 0
    # The words are lower-case literals: a case-sensitive search of a lowered copy (same offsets)
    # is three times faster than an IGNORECASE one.
    for m in _lowered_pattern(words).finditer(code.lower()):
        line += source.count(b"\n", pos, m.start())
        pos = m.start()
        if line not in skip_lines:
            found.append((m, line))
    if not found:
        return {}
    newlines = [m.start() for m in re.finditer(rb"\n", source)]
    # The string literals up to the last word (found in order from the start: a quote inside a
    # string never starts one).
    last_line_end = code.find(b"\n", found[-1][0].end())
    stop = len(code) if last_line_end == -1 else last_line_end
    # Searched in the whole text, not cut at the stop: a triple-quoted string that runs past it
    # cannot match inside a text cut there, and the search then took quotes inside that string for
    # strings of their own (nanotron's sbatch f-string: its commented-out `# export NCCL_DEBUG=`
    # lines read as code).
    strings = []
    for m in _STRING_TOKEN.finditer(code):
        if m.start() >= stop:
            break
        strings.append((m.start(), m.end()))
    starts = [s for s, _ in strings]
    out: dict[int, list[Word]] = {}
    seen: set[int] = set()
    for m, _line in found:
        i = m.start()
        k = bisect.bisect_right(starts, i) - 1
        if k >= 0 and strings[k][0] <= i < strings[k][1]:
            s, e = strings[k]
            while s > 0 and code[s - 1] in _PREFIX:
                s -= 1
            if s in seen:
                continue
            seen.add(s)
            text = code[s:e]
            body = text.lstrip(b"rRbBuUfF").strip(b"'\"")
            if b" " in body:
                continue  # prose
            kind = STRING
        else:
            s, e = i, m.end()
            while s > 0 and (code[s - 1] in WORD_BYTES or code[s - 1] >= 0x80):
                s -= 1
            while e < len(code) and (code[e] in WORD_BYTES or code[e] >= 0x80):
                e += 1
            if s in seen:
                continue
            seen.add(s)
            text = code[s:e]
            kind = NAME
        line = bisect.bisect_left(newlines, s) + 1
        line_start = newlines[line - 2] + 1 if line > 1 else 0
        before = source[line_start:s].decode("utf-8", "replace")
        out.setdefault(line, []).append(
            Word(kind, text.decode("utf-8", "replace"), (line, s - line_start), before, line + text.count(b"\n"))
        )
    return out


def plainly_own(tok: Word, source: str, own_tops: frozenset[str] = frozenset()) -> bool:
    """Whether ``tok`` is a Hub repository id (``"nvidia/Cosmos-..."``), or a name the module
    plainly defines or imports from the project's own modules, read without a parse: ``def NAME`` / ``class NAME`` / ``NAME = ...`` at the start of a
    line, or ``from .mod import NAME`` (``from own_package... import``), and no import from
    elsewhere names it. Every such name is one ``excuse`` gives "a name the project defines" (a
    subset of its judgement), so the residual pass skips parsing a module whose leftover words
    are all such names."""
    if tok.type == STRING:
        value = tok.string.strip("rbuRBU").strip("'\"")
        return _HUB_ID.fullmatch(value) is not None or is_file_name(value)
    if tok.type != NAME or _BARE.fullmatch(tok.string):
        return False
    name = re.escape(tok.string)
    imports = [m.group(0) for m in _IMPORT_STMT.finditer(source) if re.search(rf"\b{name}\b", m.group(0))]
    if any(not _own_import(stmt, own_tops) for stmt in imports):
        return False
    if imports:
        return True
    return re.search(rf"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+{name}\b|^[ \t]*{name}[ \t]*(?::[^=\n]+)?=(?!=)", source, re.MULTILINE) is not None


# An import statement (a parenthesised one over several lines included).
_IMPORT_STMT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t]+[^\n]*)", re.MULTILINE)


def _own_import(statement: str, own_tops: frozenset[str]) -> bool:
    m = re.match(r"\s*from\s+(\.*)([\w.]*)", statement)
    return m is not None and (bool(m.group(1)) or m.group(2).split(".")[0] in own_tops)


_ENV_VAR_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")

# Fields whose value names an organisation or a hosted service, never a device.
_VENDOR_FIELDS = frozenset({
    "org", "organization", "organisation", "owner", "author", "publisher", "provider", "api_type", "api_provider",
    "model_provider", "llm_provider",
    # a package's metadata (`__author__`, `__maintainer__`, Megatron's `__contact_names__`)
    "authors", "maintainer", "maintainers", "contact", "contact_name", "contact_names",
})


def _hands_hub_id(node: ast.expr) -> bool:
    """Whether ``node`` is a call handed a Hub repository of NVIDIA's organisation as an argument."""
    return isinstance(node, ast.Call) and any(
        isinstance(a, ast.Constant) and isinstance(a.value, str) and is_hub_id(a.value) for a in node.args
    )


def _field_name(node: ast.expr) -> str | None:
    """The field an expression reads: ``x["api_type"]`` -> api_type, ``cfg.provider`` -> provider."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def parse_names(
    source: bytes | str, project_modules: frozenset[str] = frozenset(), tree: ast.Module | None = None
) -> Names | None:
    """What a module defines and imports, or None when it does not parse (``tree``: ``source``
    as ``ast.parse`` reads it, when the caller already has it)."""
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return None
    names = Names()
    names.project_modules = project_modules
    text = source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape")
    names.bare_names = _BARE_NAME.search(text) is not None
    names.tree = tree
    names.round_trips = b"cuda" in text
    names.visit(tree)
    names.tree = None  # not kept past the visit (trees kept alive cost every later collection)
    return names


# A bare word written as a name (not an attribute `x.cuda`, not inside a string "cuda").
_BARE_NAME = re.compile(rb"(?<![\w.'\"])_*(?:cuda|nccl|cudnn|triton|tilelang|cutlass|helion|cupy|nvidia)_*(?![\w'\"])", re.IGNORECASE)


@dataclass
class ProjectNames:
    """The names a project defines, pooled over the files read (one file, or the whole tree)."""

    own: set[str] = field(default_factory=set)  # defined, and never imported from outside
    params: dict[str, set[str]] = field(default_factory=dict)
    attrs: set[str] = field(default_factory=set)
    markers: set[str] = field(default_factory=set)
    members: dict[str, set[str]] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)  # dotted modules of the tree
    module_parts: set[str] = field(default_factory=set)
    # Top-level packages of the project: a dotted path starting with one is the project's own
    # (the residual pass knows the packages, not every module, of the tree).
    own_tops: frozenset[str] = frozenset()
    # What a string may spell: ``own`` less the names only another module defines that are
    # spelled like an environment variable (own as a name, not as a string).
    string_own: set[str] = field(default_factory=set)
    class_members: dict[str, set[str]] = field(default_factory=dict)  # `members` and the tree's

    @classmethod
    def pool(
        cls, parsed: dict[str, Names | None], own_tops: frozenset[str] = frozenset(),
        tree_own: frozenset[str] = frozenset(), tree_foreign: frozenset[str] = frozenset(),
    ) -> ProjectNames:
        """``tree_own`` / ``tree_foreign``: the CUDA-worded names the whole tree defines (a class
        member as ``Cls.member``) and imports from outside (``ProjectFacts.own_names`` /
        ``foreign_names``), for the residual pass, which parses only the file it reads."""
        defined: set[str] = set()
        imported: set[str] = set()  # bound by an import from the project's own modules
        foreign: set[str] = set()
        out = cls(own_tops=own_tops)
        for names in parsed.values():
            if names is None:
                continue
            defined |= names.defined
            imported |= names.own_imported
            foreign |= names.foreign
            for owner, found in names.members.items():
                out.members.setdefault(owner, set()).update(found)
            for callee, found in names.params.items():
                out.params.setdefault(callee, set()).update(found)
            out.attrs |= names.attr_stores
            out.markers |= set(names.markers)
        # A name the files read define is theirs; one they import from the project, or one
        # another module defines, is the project's unless some module imports it from outside
        # (a `torch.cuda` name re-exported by a module of the project stays foreign).
        tree = {n for n in tree_own if "." not in n} - defined
        out.own = (defined | ((imported | tree) - tree_foreign)) - foreign
        # `os.environ["USE_CUDA"]` where another module has a constant `USE_CUDA = ...`: a string
        # spelled as an environment variable is a setting, whatever the other module names so.
        out.string_own = out.own - {n for n in tree if _ENV_VAR_NAME.fullmatch(n)}
        # `DeviceType.CUDA` where another module defines the class: a member named with its class
        # (never an instance's field `x.cuda`: that the file's own classes decide, as before).
        out.class_members = {owner: set(found) for owner, found in out.members.items()}
        for dotted in tree_own:
            owner, _, member = dotted.partition(".")
            # A class spelled as a class (`DeviceType`): a test's stub `class version: cuda = ...`
            # must not excuse "torch.version.cuda".
            if member and owner[:1].isupper():
                out.class_members.setdefault(owner, set()).add(member)
        out.modules = {
            ".".join(Path(rel).with_suffix("").parts[: -1 if Path(rel).stem == "__init__" else None]) for rel in parsed
        }
        out.module_parts = {part for m in out.modules for part in m.split(".")}
        return out


@dataclass
class FileExcuses:
    """What the excuses of one file need, worked out once per file."""

    rel: str
    names: Names
    project: ProjectNames
    reported_imports: set[str]
    own_names: dict
    own_paths: dict[int, set[str]]
    stacks: set[str]

    @classmethod
    def of(cls, rel: str, names: Names, project: ProjectNames, lines: set[int], stacks: set[str] = frozenset()) -> FileExcuses:
        reported = {name for name, line in names.imported.items() if line in lines}
        own_names, own_paths = _own_bare_names(
            rel, names, project.params, project.attrs, project.own, project.modules, project.markers,
            project.members, project.own_tops, project.class_members,
        )
        return cls(rel, names, project, reported, own_names, own_paths, set(stacks))


def excuse(tok: Word, ctx: FileExcuses) -> str:
    """Why ``tok`` holds no CUDA construct, or "" when it may hold one."""
    names, project = ctx.names, ctx.project
    word = tok.string
    own_reason = _own_reason(tok, ctx.own_names, ctx.own_paths)
    if own_reason is not None:
        return f"{word}: {own_reason}"
    if any(s in word.lower() for s in ctx.stacks) and not re.search(r"cuda|nccl|cudnn", word, re.IGNORECASE):
        return f"{word}: kernel language of a reported file"
    if tok.type == NAME and word in ctx.reported_imports and not tok.before.rstrip().endswith("."):
        return f"{word}: bound by a reported import"
    if tok.type == NAME and word in project.own and not _BARE.fullmatch(word):
        return f"{word}: a name the project defines"
    if tok.type == STRING and _names_own(word, project.string_own, project.module_parts, project.class_members):
        return f"{word}: a name the project defines, as a string"
    if tok.type == STRING and _fstring_own(word, project.own):
        return f"{word}: a name the project defines, in an f-string's placeholder"
    if tok.type == STRING and tok.start in names.device_tables:
        return f"{word}: the CUDA row of a device table that has the port's row"
    if tok.type == STRING and tok.start in names.skips:
        return f"{word}: a test skipped where the package is absent"
    if tok.type == STRING and tok.start in names.env_name_lists:
        return f"{word}: an environment variable's name listed among others (a list of names sets no value)"
    if tok.type == STRING and tok.start in names.test_data:
        return f"{word}: a device a test writes into a parser or constructor and asserts back (test data)"
    if tok.type == STRING and tok.start in names.needles:
        return f"{word}: a piece of source text searched for, not code that runs"
    if tok.type == STRING and tok.start in names.error_words:
        return f"{word}: a word looked for in a caught exception's message"
    if tok.type == STRING and tok.start in names.vendor_names:
        return f"{word}: NVIDIA as an organisation or a hosted service (a Hub namespace, an API provider), not its GPUs"
    if tok.type == STRING and tok.start in names.type_values:
        return f"{word}: a value a Literal[...] type accepts (the value passed is judged where it is written)"
    if tok.type == STRING and tok.start in names.labels:
        return f"{word}: a label (a test id or a command-line option's name)"
    if tok.type == STRING and tok.start in names.path_parts:
        return f"{word}: a folder or file name the program builds a path from"
    if tok.type == STRING and is_file_name(word.strip("rbuRBU").strip("'\"")):
        return f"{word}: a file's name"
    if tok.type == STRING and _HUB_ID.fullmatch(word.strip("rbuRBU").strip("'\"")):
        return f"{word}: a model repository on the Hugging Face Hub (NVIDIA's organisation), not a CUDA API"
    if tok.type == STRING and is_web_address(word.strip("rbuRBUfF").strip("'\"")):
        return f"{word}: a web or mail address"
    if _CREDENTIAL_NAME.fullmatch(word.strip("rbuRBUfF").strip("'\"")):
        return f"{word}: the name of a credential or endpoint setting (a web service's, not CUDA's)"
    # A string too: a pattern that lists names (`r"...(get|post|AsyncClient)\b"`, unsloth's scan_packages.py).
    if tok.type in (NAME, STRING) and not _whole_word_in(word):
        return f"{word}: the letters of a CUDA word across two words of a name"
    if _TRITON_CLIENT.search(word):
        return f"{word}: NVIDIA Triton Inference Server's network client, not the Triton language"
    if tok.type == NAME and not _BARE.fullmatch(word) and _attribute_root(tok) in ctx.reported_imports - {"torch"}:
        return f"{word}: reached through a reported import"
    if tok.type == STRING and tok.start in names.keys and not _BARE.fullmatch(word.strip("'\"")):
        return f"{word}: a key of the program's own data"
    return ""


# `"reports/tests_torch_cuda_stats.txt"`, `"nvidia_presentation.pdf"`, `utils/fetch_cuda_matrix.py`:
# the name of a data, log or report file, or of one of the project's scripts (never an absolute
# path such as `/usr/local/cuda/lib64`, nor a CUDA source).
_FILE_NAME = re.compile(
    r"(?![/$~])[\w.-]+(?:/[\w.-]+)*\.(?:txt|log|md|rst|pdf|png|jpe?g|gif|svg|csv|tsv|json|jsonl|ya?ml|toml|html|xml"
    r"|parquet|arrow|npy|npz|pkl|pickle|pt|pth|bin|safetensors|ckpt|onnx|zip|tar|gz|tgz|py|sh|ipynb)",
    re.IGNORECASE,
)


def is_hub_id(token: str) -> bool:
    """Whether ``token`` is a Hugging Face Hub repository of NVIDIA's organisation."""
    return _HUB_ID.fullmatch(token) is not None


def is_file_name(token: str) -> bool:
    """Whether ``token`` is the name of a data, log or report file or of a project script."""
    return _FILE_NAME.fullmatch(token) is not None


# `from_pretrained("nvidia/Cosmos-Predict2.5-2B")`: a Hub repository of NVIDIA's organisation (a
# model's name, not a CUDA image: no `nvidia/cuda`, no `:tag`); also one of NVIDIA's models that
# another organisation publishes under the model's own name (`"unsloth/NVIDIA-Nemotron-3-Nano-4B"`,
# capitalised as a model card is: `bin/nvidia-smi` is a program's path). The namespace alone,
# `"nvidia/"`, is what a Hub id is tested to start with (unsloth's `name.startswith("nvidia/")`).
_HUB_ID = re.compile(
    r"(?i:nvidia/(?!cuda)(?:[A-Za-z0-9][\w.-]*)?)|[A-Za-z0-9][\w.-]*/NVIDIA-[A-Z][A-Za-z0-9]*(?:[-.][\w.]+)*"
)


# `"https://docs.nvidia.com/cuda/"`, `"git+https://github.com/NVIDIA/apex"` is a pip requirement
# (CN711's), not a web page: only a page's address, never a package source.
_WEB_ADDRESS = re.compile(r"https?://[^\s'\"]+", re.IGNORECASE)
# `"nemo-toolkit@nvidia.com"` (Megatron's `__contact_emails__`): a mailbox at NVIDIA's domain.
_MAIL_ADDRESS = re.compile(r"(?:mailto:)?[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}", re.IGNORECASE)


def is_web_address(token: str) -> bool:
    """Whether ``token`` is the address of a web page (documentation, an API endpoint) or a mail
    address."""
    return _WEB_ADDRESS.fullmatch(token) is not None or _MAIL_ADDRESS.fullmatch(token) is not None


# `os.environ["NVIDIA_API_KEY"]`, `NVIDIA_BASE_URL`: a hosted model service's credentials and
# endpoints (NVIDIA's API catalog), read over the network; nothing of CUDA runs here.
_CREDENTIAL_NAME = re.compile(r"[A-Z0-9_]*_(?:API_KEY|KEY|TOKEN|SECRET|BASE_URL|URL|ENDPOINT|API_BASE)")


# What a function that takes `**kwargs` adds to its parameters: no identifier is spelled so.
_VAR_KEYWORDS = "**"


def _whole_word_in(name: str) -> bool:
    """Whether a CUDA word of ``name`` is written as a word of it: ``is_cuda``, ``CudaGraph``,
    ``NCCLComm``, ``pynccl``, never ``AsyncClient`` (whose "ncCl" crosses from ``Async`` into
    ``Client``): a match that changes from lower to upper case inside is two words' letters."""
    for m in _WORDS_STR.finditer(name):
        text = m.group(0)
        if not any(a.islower() and b.isupper() for a, b in zip(text, text[1:])):
            return True
    return False


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
    if _WORDS_STR.search(re.sub(r"\{[^{}]*\}", "", body)):
        return False
    worded = [w for expr in re.findall(r"\{([^{}]*)\}", body) for w in re.findall(r"[A-Za-z_]\w*", expr) if _WORDS_STR.search(w)]
    return bool(worded) and all(w in own and not _BARE.fullmatch(w) for w in worded)


_FSTRING = re.compile(r"""([rRbBuU]?[fF][rRbBuU]?)('''|\"\"\"|'|")(.*)\2$""", re.S)


def _attribute_root(tok: Word) -> str | None:
    """``bnb`` for the ``triton_based_modules`` of ``bnb.nn.triton_based_modules``: the name a
    dotted chain starts from, when the token is an attribute in it."""
    m = re.search(r"([A-Za-z_]\w*)(?:\s*\.\s*[A-Za-z_]\w*)*\s*\.\s*$", tok.before)
    return m.group(1) if m else None


def _names_own(token: str, own: set[str], module_parts: set[str], members: dict[str, set[str]] | None = None) -> bool:
    """A string that spells the project's own names (``monkeypatch.setattr(mod,
    "has_cuda_capability", ...)``, the annotation ``"CUDAGraphWrapper"``,
    ``patch("pkg.cudagraph.utils.device_type", ...)``): each dotted part with a CUDA word is a
    name the project defines (never the bare word `cuda`) or one of its modules, or a member
    of the project's class named just before it (``"DeviceType.CUDA"``)."""
    value = token.strip("rbuRBUfF").strip("'\"")
    if not re.fullmatch(r"[A-Za-z_][\w.]*", value):
        return False
    parts = value.split(".")
    worded = [(k, part) for k, part in enumerate(parts) if _WORDS_STR.search(part)]
    return bool(worded) and all(
        (part in own and not _BARE.fullmatch(part)) or part in module_parts
        or (k > 0 and part in (members or {}).get(parts[k - 1], ()))
        for k, part in worded
    )


def _own_bare_names(
    rel: str, names: Names, params: dict[str, set[str]], attrs: set[str], own: set[str], modules: set[str],
    markers: set[str] = frozenset(), members: dict[str, set[str]] | None = None, own_tops: frozenset[str] = frozenset(),
    class_members: dict[str, set[str]] | None = None,
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
        if callee in names.foreign:
            continue
        known = params.get(callee)
        if keyword in (known or ()):
            out[(line, col), keyword] = f"a keyword of the project's {callee}()"
        elif (_VAR_KEYWORDS in known) if known is not None else (callee in own or callee in names.own_imported):
            # `_host(has_usable_nvidia=False)` to a `def _host(**fields)`, or `HostInfo(...)` where
            # the module binds `HostInfo` itself (`HostInfo = loaded_module.HostInfo`) or imports it
            # from the project: the parameter is the project's, declared where the residual pass
            # does not read. unsloth's installer tests passed a host's fields so, line after line.
            # A def that is read and takes no such keyword keeps it (`f(cuda=True)`: the API's word).
            out.setdefault(((line, col), keyword), f"a keyword of the project's {callee}()")
    for line, col, attr in names.attr_reads:
        if attr in attrs:
            out[(line, col), attr] = "an attribute the project assigns"
    for where in names.member_defs:
        out[where, ""] = "a member the project's class defines"
    for line, col, cls, attr in names.member_reads:
        if cls not in names.foreign and attr in (class_members or members or {}).get(cls, ()):
            out[(line, col), attr] = f"a member of the project's class {cls}"
    # `args.cuda` where `class Args: cuda: bool = True` (cleanrl's tyro arguments): a field of the
    # project's own class read off an instance, never called (`x.cuda()` is the API).
    fields = {name for names_ in (members or {}).values() for name in names_}
    for line, col, receiver, attr in names.field_reads:
        if receiver not in names.foreign and attr in fields:
            out.setdefault(((line, col), attr), "a field of the project's class")
        elif receiver in names.own_imported and receiver not in (members or {}):
            # `DeviceType.CUDA` where `DeviceType` comes from a module of the project that is not
            # read with this one (the residual pass reads one file): a member of the project's own.
            out.setdefault(((line, col), attr), f"a member of {receiver}, which the project defines")
    for line, col, value in names.exported:
        if value in own:
            for quote in ('"', "'"):
                out[(line, col), f"{quote}{value}{quote}"] = "a name the module exports"
    paths: dict[int, set[str]] = {}
    package = Path(rel).parent.parts
    for line, (level, *parts) in names.own_import_paths:
        base = package[: len(package) - level + 1] if level else ()
        dotted = ".".join((*base, *parts))
        if any(m == dotted or m.endswith("." + dotted) for m in modules) or (
            own_tops and (level or (parts and parts[0] in own_tops))
        ):
            paths.setdefault(line, set()).update(parts)
    return out, paths


def _own_reason(tok: Word, own_names: dict, paths: dict[int, set[str]]) -> str | None:
    where = tok.start
    if tok.type != NAME:
        return own_names.get((where, tok.string))
    if not _BARE.fullmatch(tok.string):
        # `use_cuda`, `move_to_cuda`: a name the project defines, decided by `own`; a marker the
        # project registers is its own name only in `pytest.mark.<name>`; `triton_utils` in
        # `from .triton_utils.mixin import ...`: a module of the tree.
        return own_names.get((where, tok.string)) or _own_module_part(tok, paths)
    reason = own_names.get((where, tok.string)) or own_names.get((where, ""))
    return reason or _own_module_part(tok, paths)


def _own_module_part(tok: Word, paths: dict[int, set[str]]) -> str | None:
    """A part of the module path of a `from` (or plain) import of the project's own module."""
    if tok.string in paths.get(tok.start[0], ()):
        before = tok.before
        if re.match(r"\s*from\s", before) and not re.search(r"\bimport\b", before):
            return "a module of the project"
        if re.match(r"\s*import\s", before) and not re.search(r"\bas\b", before):
            return "a module of the project"
    return None
