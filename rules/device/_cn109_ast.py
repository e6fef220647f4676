"""CN109's visitor (``cn109_cuda_device_name_left.py``) on CPython's ``ast``: its raw reports, one
per "cuda" literal it would report, with the message it would write. Which of them survive is the
engine's (``python/_ast_nets.net_filtered``: once per unit, and only where no other rule reports
the unit), as ``python/_lint.py`` decides it for the visitor.

Each function is its namesake in the rule's module read on the walk's ancestors (no ``Element``,
``DictElement``, ``ComparisonTarget`` or ``Index`` wrappers; an ``ArgNode`` between a call and an
argument). Unsure (the file goes to libcst): an f-string or an implicit concatenation spelling
"cuda", a test function that writes a device and may compare it back (``is_test_data``), a file
that names ONNX Runtime (``_onnxruntime_provider``), a tuple written as a subscript's index beside
prose.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Sequence

from cuda2neuron.core import Effort, Finding
from cuda2neuron.python import ArgNode, Unsure, generated_text

from .._shared.detector import AstDetector
from .._shared.round_trip import device_texts, module_params, module_qualifier, round_trip_texts
from .._shared.nets_ast import is_text
from . import _strings_ast
from .._shared.kernels import ONNXRUNTIME_PACKAGES
from ._helpers import _DEVICE_RE, _PLAIN_DEVICE_RE, _PREFIX, _STRING_TESTS

__all__ = ["CudaNameDetector"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COLLECTIONS = (ast.List, ast.Tuple, ast.Set)


class CudaNameDetector(AstDetector):
    """``messages``: the rule's (test, key, value) message makers and guidance, handed over so
    that the texts live in one place."""

    def __init__(self, rule: type, file, texts) -> None:  # noqa: ANN001 - python.AstFile; the rule's texts
        super().__init__(rule, file)
        self.texts = texts
        self._round_trip: tuple | None = None
        self._onnx: bool | None = None

    def findings(self) -> list[Finding] | None:
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, guidance, Effort.LOW) for node, message, guidance, _ in reports]

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        """``visit_FormattedString``: an f-string that ``looks_like_cuda_fstring`` (its raw text
        starts with "cuda:" and a placeholder, or is a plain device name) is checked as a literal
        is; a string inside a placeholder is visited as a literal (a report there leaves the walk
        unsure: ``reports``)."""
        text = _strings_ast.literal_text(self.file, node)
        if "cuda" not in text:
            return
        if not _strings_ast.simple_string_text(text):
            raise Unsure("an implicit concatenation with an f-string spelling cuda")
        body = text.lstrip("rRbBuUfF")
        quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
        body = body[len(quote) : len(body) - len(quote)]
        if body.startswith("cuda:{") and not body.startswith("cuda:{{"):
            self._check(node)
        elif "{" not in body.replace("{{", "") and "}" not in body.replace("}}", ""):
            if "\\" in body:
                raise Unsure("escapes in an f-string's text: libcst keeps them raw")
            if _PLAIN_DEVICE_RE.match(body.replace("{{", "{").replace("}}", "}")):
                self._check(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str) or isinstance(self.ctx.parent, ast.JoinedStr):
            return  # bytes have no string value; an f-string's text is no SimpleString (a string
            # inside a placeholder is one: a report there leaves the walk unsure, see reports())
        text = _strings_ast.literal_text(self.file, node)
        if not _strings_ast.simple_string(self.file, node):
            if "cuda" in text and any(_is_device(part) for part in _parts(text)):
                raise Unsure("an implicit concatenation with a device name as a part: libcst reads each part alone")
            return
        if "cuda" not in text:
            return  # escapes spell it: the visitor's `"cuda" in node.value` is false
        value = node.value
        if not (value == _PREFIX or _DEVICE_RE.match(value)):
            return
        self._check(node)

    def _check(self, node: ast.Constant) -> None:
        ancestors = self.ctx.ancestors
        if is_text(ancestors, node) or _among_words(ancestors, node) or _searched_in_error(ancestors):
            return
        found = _strings_ast.value_user(self.file, ancestors, node, templates=True)
        kind, user, above = self._use_of(ancestors, found, node)
        if kind is None:
            return
        if isinstance(node, ast.Constant):
            self._test_data(node)  # an f-string has no string value: never test data
        if "onnxruntime" in self.file.text and self._imports_onnxruntime():
            raise Unsure("a provider handed to ONNX Runtime (_onnxruntime_provider)")
        start, _ = self.file.bounds(user)
        shown = generated_text(self.file, user, above, start, 0, "")
        message, guidance = self.texts(kind, shown)
        self._reports.append((node, message, guidance, tuple(ancestors)))

    def _imports_onnxruntime(self) -> bool:
        """Could a call resolve to ONNX Runtime (``receiving_call``)? Only through an import that
        names it (a relative one too: libcst's module name drops the dots)."""
        if self._onnx is None:
            self._onnx = any(
                any(a.name.split(".")[0] in ONNXRUNTIME_PACKAGES for a in n.names)
                or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in ONNXRUNTIME_PACKAGES)
                for n in ast.walk(self.file.tree)
                if isinstance(n, (ast.Import, ast.ImportFrom))
            )
        return self._onnx

    def _test_data(self, node: ast.Constant) -> None:
        """``is_test_data``: unsure where a test function writes a device it may compare back."""
        if not device_texts(node.value):
            return
        test = next((a for a in reversed(self.ctx.ancestors) if isinstance(a, _FUNCTIONS)), None)
        if test is None or not test.name.startswith("test"):
            return
        if self._round_trip is None:
            self._round_trip = (module_qualifier(self.file.tree), module_params(self.file.tree))
        if round_trip_texts(test, *self._round_trip):
            raise Unsure("a test that writes a device and asserts it back (is_test_data)")

    def _use_of(self, ancestors: Sequence[object], found, node: ast.AST):  # noqa: ANN001, ANN202
        """``_use_of``: (kind, the node whose code the message shows, its ancestors)."""
        own = (node, tuple(ancestors))
        if found is None:
            return ("value", *own)
        i, child = found
        anc = ancestors[i]
        if isinstance(anc, ast.Compare):
            return "test", anc, tuple(ancestors[:i])
        if isinstance(anc, ArgNode) and i >= 1 and isinstance(ancestors[i - 1], ast.Call):
            call = ancestors[i - 1]
            args = self.ctx.args(call)
            if isinstance(call.func, ast.Attribute) and call.func.attr in _STRING_TESTS and args[0] is anc:
                return "test", call, tuple(ancestors[: i - 1])
            return ("value", *own)
        if isinstance(anc, ast.Dict) and any(k is child for k in anc.keys):
            if any(k is not None and _names_neuron(self.file, k) for k in anc.keys):
                return None, node, ()
            holder = ancestors[i - 1] if i >= 1 else None
            if isinstance(holder, ArgNode) and holder.keyword == "map_location":
                return None, node, ()
            if _max_memory(holder):
                return None, node, ()
            value = anc.values[next(j for j, k in enumerate(anc.keys) if k is child)]
            if _reads_version(value):
                return None, node, ()  # a versions report: "cuda" names the toolkit
            return ("key", *own)
        if isinstance(anc, ast.Subscript) and child is anc.slice:
            if _terminal_name(anc.value) == "Literal":
                return None, node, ()
            holder = ancestors[i - 1] if i >= 1 else None
            if isinstance(holder, ast.Assign) and any(t is anc for t in holder.targets) and _reads_version(holder.value):
                return None, node, ()  # `versions["cuda"] = torch.version.cuda`
            return ("key", *own)
        return ("value", *own)


def _parts(text: str) -> list[str]:
    """The string tokens of an implicit concatenation's text (comments and breaks between)."""
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.STRING]
    except (tokenize.TokenError, SyntaxError):
        raise Unsure("a concatenation the tokenizer cannot split") from None


def _is_device(part: str) -> bool:
    """Would the visitor check this part (``"cuda" in node.value and is_cuda_device_string``)?"""
    if "cuda" not in part:
        return False
    try:
        value = ast.literal_eval(part)
    except (SyntaxError, ValueError):
        return True  # not a plain literal (an f-string part is no Constant's): the safe side
    return isinstance(value, str) and (value == _PREFIX or _DEVICE_RE.match(value) is not None)


def _among_words(ancestors: Sequence[object], node: ast.AST) -> bool:
    if not ancestors or not isinstance(ancestors[-1], _COLLECTIONS):
        return False
    collection = ancestors[-1]
    prose = any(
        e is not node and isinstance(e, ast.Constant) and type(e.value) is str and " " in e.value.strip()
        for e in collection.elts
    )
    if prose and len(ancestors) >= 2 and isinstance(ancestors[-2], ast.Subscript) and ancestors[-2].slice is collection:
        raise Unsure("a tuple as a subscript's index: libcst's elements if written in parentheses")
    return prose


def _searched_in_error(ancestors: Sequence[object]) -> bool:
    # The walk puts no node for a comprehension's `for` on the ancestors: the collection is the
    # first loop's iterable (libcst's outer CompFor).
    if len(ancestors) < 2:
        return False
    collection, comp = ancestors[-1], ancestors[-2]
    if not (isinstance(collection, _COLLECTIONS) and isinstance(comp, (ast.GeneratorExp, ast.ListComp, ast.SetComp))):
        return False
    comp_for = comp.generators[0]
    if comp_for.iter is not collection:
        return False
    test, target = comp.elt, comp_for.target
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)
        and isinstance(test.left, ast.Name) and isinstance(target, ast.Name) and test.left.id == target.id
    ):
        return False
    caught = {h.name for h in ancestors if isinstance(h, ast.ExceptHandler) and h.name is not None}
    return bool(caught & _names_in(test.comparators[0]))


def _names_in(node: ast.AST) -> set[str]:
    """Every libcst ``Name`` under ``node``: names, attributes' members, keywords, parameters."""
    found: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, ast.keyword) and n.arg is not None:
            found.add(n.arg)
        elif isinstance(n, ast.arg):
            found.add(n.arg)
    return found


def _terminal_name(node: object) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _max_memory(holder: object) -> bool:
    if isinstance(holder, ArgNode):
        return holder.keyword == "max_memory"
    if isinstance(holder, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id.endswith("max_memory") for t in holder.targets)
    return False


def _names_neuron(file, key: ast.AST) -> bool:  # noqa: ANN001 - python.AstFile
    if isinstance(key, ast.Constant) and isinstance(key.value, (str, bytes)):
        return _strings_ast.simple_string(file, key) and type(key.value) is str and key.value.startswith("neuron")
    if isinstance(key, ast.Tuple):
        return any(
            isinstance(e, ast.Constant) and isinstance(e.value, (str, bytes)) and _names_neuron(file, e) for e in key.elts
        )
    return False


def _reads_version(value: ast.AST) -> bool:
    """The rule's ``_reads_version`` on ``ast``."""
    if isinstance(value, ast.Call):
        if isinstance(value.func, ast.Name) and value.func.id == "str" and len(value.args) == 1 and not value.keywords:
            return _reads_version(value.args[0])
        value = value.func
    parts: list[str] = []
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if isinstance(value, ast.Name):
        parts.append(value.id)
    return any("version" in p.lower() for p in parts)
