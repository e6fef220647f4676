"""The device family's string helpers (``_helpers.py``) on CPython's ``ast``, for CN102's and
CN103's detectors: where a "cuda" literal is used, and whether the holds that keep a device
string as it is (a CUDA-only kernel, a raw pointer, a reader in another module, a record) could
apply. Each function is its namesake in ``_helpers.py`` (or ``_shared/values.py``,
``_shared/consumers.py``) read on the walk's ancestors (``python/_ast_walk.py``: an ``ArgNode``
between a call and an argument's value; no ``Element``, ``DictElement`` or ``ComparisonTarget``
wrappers). A shape the port does not follow raises ``Unsure``: the file goes to libcst.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence

from cuda2neuron.core import ProjectFacts
from cuda2neuron.python import ArgNode, AstFile, AstWalk, Unsure

from .._shared.ast_names import ast_dotted
from .._shared.consumers import _HAND_BACK, _STDLIB, takes_torch_device
from .._shared.kernel_gates import SETUP_METHODS
from .._shared.kernels import (
    _TORCH_CUDA_ONLY_MEMBERS,
    _REQUIREMENT,
    CUDA_IPC_CALLS,
    CUDA_PROVIDERS,
    KERNEL_LANGUAGES,
    describe_module,
    project_module,
    relative_module,
)
from .._shared.names import is_device_word
from ..files.deps._helpers import cuda_only_package
from ._helpers import (
    _AMP_PREFIXES,
    _AVAILABILITY,
    _COLLECTION_ADDS,
    _DEVICE_KEYWORDS,
    _DEVICE_PARAMS,
    _DEVICE_SETTER,
    _LOOKUP_METHODS,
    _LOOKUPS,
    _PREFIX,
    _STRING_TESTS,
    _TEST_ASSERTIONS,
    Use,
    UseKind,
)

__all__ = [
    "KERNEL_WORDS", "find_use", "is_bare_prefix", "requirement_literal", "library_callee", "library_callee_by_name", "literal_text",
    "simple_string", "string_value",
]  # fmt: skip

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# One string token, as libcst's SimpleString holds it (no implicit concatenation).
_ONE_LITERAL = re.compile(
    r"""(?s)[A-Za-z]{0,2}(?:\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    r"""|"(?:[^"\\\r\n]|\\.)*"|'(?:[^'\\\r\n]|\\.)*')"""
)


def literal_text(file: AstFile, node: ast.AST) -> str:
    start, end = file.bounds(node)
    return file.text[start:end]


def simple_string_text(text: str) -> bool:
    """Is ``text`` one string token (an f-string's too), not an implicit concatenation?"""
    return _ONE_LITERAL.fullmatch(text) is not None


def simple_string(file: AstFile, node: object) -> bool:
    """Is ``node`` one string token (libcst's ``SimpleString``), not an implicit concatenation?"""
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and _ONE_LITERAL.fullmatch(literal_text(file, node)) is not None


def fstring_may_report(file: AstFile, node: ast.JoinedStr) -> bool:
    """Could libcst's walk report on this f-string (``looks_like_cuda_fstring``: its text starts
    with "cuda") or on a "cuda" literal inside one of its placeholders (whose positions CPython
    3.11 may misplace)? An f-string that only says "cuda" in its text, or a concatenation whose
    later part does (libcst's ``ConcatenatedString`` stands between it and any use), cannot."""
    for value in node.values:
        if isinstance(value, ast.FormattedValue) and any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and "cuda" in n.value for n in ast.walk(value)
        ):
            return True
    text = literal_text(file, node)
    body = text.lstrip("rRbBuUfF")
    body = body[3:] if body[:3] in ('"""', "'''") else body[1:]
    return body.startswith("cuda")


def string_value(node: object) -> str | None:
    """``_shared/strings.string_value``: a plain string literal's value (concatenations included)."""
    return node.value if isinstance(node, ast.Constant) and type(node.value) is str else None


def is_bare_prefix(file: AstFile, node: object) -> bool:
    return simple_string(file, node) and string_value(node) == _PREFIX


def _is_string_template(file: AstFile, node: object) -> bool:
    # libcst's SimpleString or FormattedString (a ConcatenatedString is neither).
    return isinstance(node, ast.JoinedStr) or simple_string(file, node)


def _is_collection(node: object) -> bool:
    if isinstance(node, ast.IfExp):
        return _is_collection(node.body) or _is_collection(node.orelse)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.Add) and _is_collection(node.left)
    return isinstance(node, (ast.List, ast.Tuple))


def value_user(file: AstFile, ancestors: Sequence[object], node: object, *, templates: bool = False) -> tuple[int, object] | None:
    """``_shared/values.value_user``: a list, tuple or set passes its elements on itself (ast
    has no ``Element`` node between them)."""
    child = node
    i = len(ancestors) - 1
    while i >= 0:
        anc = ancestors[i]
        if isinstance(anc, ast.IfExp):
            if child is anc.test:
                return None
            child, i = anc, i - 1
            continue
        if isinstance(anc, ast.BoolOp):
            child, i = anc, i - 1
            continue
        if isinstance(anc, (ast.Tuple, ast.List, ast.Set)):
            child, i = anc, i - 1
            continue
        if isinstance(anc, ast.BinOp) and isinstance(anc.op, ast.Add) and _is_collection(child):
            child, i = anc, i - 1
            continue
        if templates and isinstance(anc, ast.BinOp) and child is anc.left:
            if isinstance(anc.op, ast.Mod) and _is_string_template(file, child):
                child, i = anc, i - 1
                continue
            if isinstance(anc.op, ast.Add) and simple_string(file, child):
                child, i = anc, i - 1
                continue
        if (
            templates
            and isinstance(anc, ast.Attribute)
            and anc.attr == "format"
            and child is anc.value
            and i >= 1
            and isinstance(ancestors[i - 1], ast.Call)
            and _is_string_template(file, child)
        ):
            child, i = ancestors[i - 1], i - 2
            continue
        return i, child
    return None


def _args(ctx: AstWalk, call: ast.Call) -> list[ArgNode]:
    return ctx.args(call)


def _positional(ctx: AstWalk, call: ast.Call) -> list[ArgNode]:
    return [a for a in ctx.args(call) if a.keyword is None and not a.star]


def says_device(ctx: AstWalk, node: object) -> bool:
    """``_helpers.says_device`` on ``ast``."""
    if isinstance(node, ast.Name):
        return is_device_word(node.id)
    if isinstance(node, ast.Attribute):
        if node.attr == "type":
            value = node.value
            if isinstance(value, ast.Call):
                return ctx.qualname(value.func) == "torch.device"
            if isinstance(value, ast.Subscript) and not isinstance(value.slice, (ast.Tuple, ast.Slice)):
                index = value.slice
                # libcst's Integer, Name (True, None, a name) and UnaryOperation.
                if isinstance(index, (ast.Name, ast.UnaryOp)) or (
                    isinstance(index, ast.Constant) and (index.value is None or isinstance(index.value, (bool, int)))
                ):
                    return says_device(ctx, value.value)
            return says_device(ctx, value)
        return is_device_word(node.attr)
    if isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Tuple):
            # `x[a, b]` (two elements) or `x[(a, b)]` (one, a tuple): no key either way.
            return False
        if isinstance(index, ast.Slice):
            return False
        key = string_value(index)
        return key is not None and is_device_word(key)
    if isinstance(node, ast.Call):
        func = node.func
        args = _args(ctx, node)
        if isinstance(func, ast.Name) and func.id == "str" and len(args) == 1:
            return says_device(ctx, args[0].value)
        if isinstance(func, ast.Attribute) and func.attr in ("lower", "strip") and not args:
            return says_device(ctx, func.value)
        if isinstance(func, ast.Name) and func.id == "getattr" and 2 <= len(args) <= 3:
            return string_value(args[1].value) == "type" and says_device(ctx, args[0].value)
        if isinstance(func, ast.Name):
            return is_device_word(func.id)
        if isinstance(func, ast.Attribute):
            return is_device_word(func.attr)
    return False


def find_use(ctx: AstWalk, node: object) -> Use | None:
    """``_helpers.find_use`` on ``ast``; ``Use.user`` is the ``ast`` node (``Compare`` for a
    comparison). Raises ``Unsure`` for the shapes not followed here: a pytest parametrization,
    a ``map_location`` dict."""
    file = ctx.file
    ancestors = ctx.ancestors
    chosen = _chosen_when_available(ctx, ancestors, node)
    if chosen is not None:
        return chosen
    found = value_user(file, ancestors, node, templates=True)
    if found is None:
        return None
    i, child = found
    anc = ancestors[i]
    above = tuple(ancestors[:i])
    if isinstance(anc, ArgNode) and i >= 1 and isinstance(ancestors[i - 1], ast.Call):
        call = ancestors[i - 1]
        if (ctx.qualname(call.func) or "").startswith("pytest.") or any(
            isinstance(a, ast.Call) and (ctx.qualname(a.func) or "").startswith("pytest.") for a in ancestors[:i]
        ):
            raise Unsure("a pytest parametrization (_parametrized_device)")
        return _arg_use(ctx, call, anc, above[:-1])
    if isinstance(anc, ast.arg):
        if child is not anc.annotation and is_device_word(anc.arg):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        return None
    if isinstance(anc, ast.Assign):
        if child is not anc.value:
            return None
        if any(says_device(ctx, t) for t in anc.targets):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        if len(anc.targets) == 1 and isinstance(anc.targets[0], ast.Name):
            return Use(UseKind.BINDING, anc, above, what=anc.targets[0].id)  # type: ignore[arg-type]
        return None
    if isinstance(anc, ast.AnnAssign):
        if child is anc.value and says_device(ctx, anc.target):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        return None
    if isinstance(anc, ast.Dict):
        return _dict_use(ctx, anc, child, above)
    if isinstance(anc, (ast.For, ast.AsyncFor)):
        if child is anc.iter and says_device(ctx, anc.target):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        return None
    if isinstance(anc, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        # libcst's CompFor sits between: the loop whose iterable the value is.
        loop = next((g for g in anc.generators if g.iter is child), None)
        if loop is not None and says_device(ctx, loop.target):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        return None
    if isinstance(anc, ast.Return):
        function = next((a for a in reversed(ancestors[:i]) if isinstance(a, (*_FUNCTIONS, ast.Lambda))), None)
        if isinstance(function, _FUNCTIONS) and is_device_word(function.name):
            return Use(UseKind.PLACEMENT, anc, above)  # type: ignore[arg-type]
        return None
    if isinstance(anc, ast.Compare):
        if len(anc.ops) != 1:
            return None
        if child is anc.left:
            if says_device(ctx, anc.comparators[0]):
                return Use(UseKind.COMPARISON, anc, above)  # type: ignore[arg-type]
            return None
        if says_device(ctx, anc.left):
            return Use(UseKind.COMPARISON, anc, above)  # type: ignore[arg-type]
        return None
    return None


def _chosen_when_available(ctx: AstWalk, ancestors: Sequence[object], node: object) -> Use | None:
    child = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, (ast.List, ast.Tuple, ast.Set)):
            child = anc
            continue
        if isinstance(anc, ast.IfExp) and child is anc.body:
            test = anc.test
            if isinstance(test, ast.Call) and ctx.qualname(test.func) in _AVAILABILITY:
                return Use(UseKind.PLACEMENT, anc, tuple(ancestors[:i]))  # type: ignore[arg-type]
        return None
    return None


def _arg_use(ctx: AstWalk, call: ast.Call, arg: ArgNode, above: tuple[object, ...]) -> Use | None:
    file = ctx.file
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _STRING_TESTS and arg.keyword is None:
        if _positional(ctx, call)[:1] == [arg] and (is_bare_prefix(file, arg.value) or says_device(ctx, func.value)):
            return Use(UseKind.COMPARISON, call, above)  # type: ignore[arg-type]
        return None
    if isinstance(func, ast.Name) and func.id == "len" and is_bare_prefix(file, arg.value) and len(_args(ctx, call)) == 1:
        return Use(UseKind.COMPARISON, call, above)  # type: ignore[arg-type]
    if _is_test_assertion(func) and arg.keyword is None:
        pair = _positional(ctx, call)[:2]
        if arg in pair and len(pair) == 2:
            other = pair[1] if pair[0] is arg else pair[0]
            if says_device(ctx, other.value):
                return Use(UseKind.COMPARISON, call, above)  # type: ignore[arg-type]
        return None
    qualified = ctx.qualname(func)
    if qualified is not None and qualified.startswith(_AMP_PREFIXES):
        return None
    if arg.keyword is not None:
        kw = arg.keyword
        if kw == "map_location":
            return Use(UseKind.PLACEMENT, call, above, what="map_location")  # type: ignore[arg-type]
        if kw in _DEVICE_KEYWORDS or (kw.endswith("_device") and kw != "output_device"):
            return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
        if kw == "device_type" and (qualified is None or not qualified.startswith("torch")):
            return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
        if qualified is not None and qualified in _DEVICE_PARAMS and _DEVICE_PARAMS[qualified][1] == kw:
            return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
        if kw in ("default", "choices") and _is_device_option(ctx, call):
            return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
        return None
    positions = _positional(ctx, call)
    if arg not in positions:
        return None
    index = positions.index(arg)
    if _lookup_default(ctx, call, qualified, positions, index):
        return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
    if qualified is None and isinstance(func, ast.Attribute) and func.attr == "to":
        return Use(UseKind.PLACEMENT, call, above) if index == 0 else None  # type: ignore[arg-type]
    if qualified is None and isinstance(func, ast.Attribute) and func.attr in _COLLECTION_ADDS:
        if index == _COLLECTION_ADDS[func.attr] and says_device(ctx, func.value):
            return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
        return None
    if qualified is not None and qualified in _DEVICE_PARAMS and _DEVICE_PARAMS[qualified][0] == index:
        return Use(UseKind.PLACEMENT, call, above, what=_DEVICE_PARAMS[qualified][1])  # type: ignore[arg-type]
    terminal = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if index == 0 and not (qualified or "").startswith("torch.") and _DEVICE_SETTER.fullmatch(terminal) is not None:
        return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
    if qualified is None and _own_device_parameter(ctx, func, index):
        return Use(UseKind.PLACEMENT, call, above)  # type: ignore[arg-type]
    return None


def _own_device_parameter(ctx: AstWalk, func: ast.expr, index: int) -> bool:
    if isinstance(func, ast.Name):
        name, body, skip = func.id, ctx.file.tree.body, 0
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        owner = next((a for a in reversed(ctx.ancestors) if isinstance(a, ast.ClassDef)), None)
        if owner is None:
            return False
        name, body, skip = func.attr, owner.body, 1
    else:
        return False
    found = [s for s in body if isinstance(s, _FUNCTIONS) and s.name == name]
    if not found:
        return False
    last = found[-1]
    params = [*last.args.posonlyargs, *last.args.args]
    if skip and any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in last.decorator_list):
        skip = 0
    params = params[skip:]
    return index < len(params) and is_device_word(params[index].arg)


def _lookup_default(ctx: AstWalk, call: ast.Call, qualified: str | None, positions: list[ArgNode], index: int) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "getattr":
        spots = _LOOKUPS["getattr"]
    elif qualified in _LOOKUPS:
        spots = _LOOKUPS[qualified]
    elif isinstance(func, ast.Attribute) and func.attr in _LOOKUP_METHODS:
        spots = (0, 1)
    else:
        return False
    key_at, default_at = spots
    if index != default_at or len(positions) <= key_at:
        return False
    key = string_value(positions[key_at].value)
    return key is not None and is_device_word(key)


def _is_test_assertion(func: ast.expr) -> bool:
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _TEST_ASSERTIONS
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    )


def _is_device_option(ctx: AstWalk, call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "add_argument"):
        return False
    for a in _positional(ctx, call):
        option = string_value(a.value)
        if option is not None and is_device_word(option.lstrip("-").replace("-", "_")):
            return True
    return False


def _dict_use(ctx: AstWalk, dictionary: ast.Dict, child: object, above: tuple[object, ...]) -> Use | None:
    at = next((k for k, v in enumerate(dictionary.values) if v is child), None)
    if at is not None:
        key_node = dictionary.keys[at]
        if key_node is None:
            return None  # `**spread`: libcst's StarredDictElement uses nothing
        key = string_value(key_node)
        if key is not None and is_device_word(key):
            return Use(UseKind.PLACEMENT, dictionary, above)  # type: ignore[arg-type]
    # A map_location dict (its values are devices, its keys twinned): libcst's.
    if len(above) >= 2 and isinstance(above[-1], ArgNode) and isinstance(above[-2], ast.Call):
        arg, call = above[-1], above[-2]
        if arg.keyword == "map_location" or (arg.keyword is None and ctx.qualname(call.func) in ("torch.load", "torch.jit.load")):
            raise Unsure("a map_location dict")
    return None


# -- the holds ----------------------------------------------------------------------------------


def _foreign(ctx: AstWalk, call: ast.Call, facts: ProjectFacts) -> str | None:
    qualified = ctx.call_qualname(call)
    if qualified is None:
        return None
    top = qualified.split(".")[0]
    if top == "torch" or top in _STDLIB or top in _HAND_BACK or top in facts.own_packages:
        return None
    return qualified


def library_callee(ctx: AstWalk, node: object, facts: ProjectFacts) -> str | None:
    """``_shared/consumers.library_callee``."""
    found = value_user(ctx.file, ctx.ancestors, node)
    if found is None:
        return None
    i, _ = found
    arg, call = ctx.ancestors[i], ctx.ancestors[i - 1] if i >= 1 else None
    if not (isinstance(arg, ArgNode) and isinstance(call, ast.Call)):
        return None
    return _foreign(ctx, call, facts)


def _names_in(node: object) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.IfExp):
        return _names_in(node.body) + _names_in(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [n for v in node.values for n in _names_in(v)]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [n for e in node.elts for n in _names_in(e.value if isinstance(e, ast.Starred) else e)]
    return []


def library_callee_by_name(ctx: AstWalk, node: object, facts: ProjectFacts) -> str | None:
    """``_shared/consumers.library_callee_by_name``. The visitor keeps the first callee its
    walk meets for a name; where two differ, the walks' orders could too: ``Unsure``."""
    chain = ctx.ancestors
    found = value_user(ctx.file, chain, node)
    if found is None:
        return None
    i, child = found
    assign = chain[i]
    if not isinstance(assign, ast.Assign) or assign.value is not child:
        return None
    names = sorted(t.id for t in assign.targets if isinstance(t, ast.Name))
    func = next((a for a in reversed(chain[:i]) if isinstance(a, _FUNCTIONS)), None)
    if not names or func is None:
        return None
    handed: dict[str, set[str]] = {}
    for stmt in func.body:
        for call in ast.walk(stmt):
            if not isinstance(call, ast.Call):
                continue
            # libcst's `*xs` is an Arg whose value is `xs`: the names inside a starred list count.
            spelled = [n for arg in ctx.args(call) for n in _names_in(arg.value)]
            if not spelled:
                continue
            callee = _foreign(ctx, call, facts)
            if callee is None or takes_torch_device(callee):
                continue
            for name in spelled:
                handed.setdefault(name, set()).add(callee)
    for name in names:
        if name in handed:
            if len(handed[name]) > 1 or any(n in handed and n != name for n in names):
                raise Unsure("several libraries read the name")
            return next(iter(handed[name]))
    return None


# Words of the code that builds or reaches CUDA-only code without an import the index reads
# (``_shared/kernels._Collector``), read as words: a run-time extension build, an operator looked
# up by name, another process on a GPU (``requirement_literal`` reads the other sources).
KERNEL_WORDS = re.compile(r"cpp_extension|_jit_get_operation|CUDA_VISIBLE_DEVICES")


def _literal_parts(file: AstFile, node: ast.Constant) -> list[str] | None:
    """The values of the string tokens libcst reads one by one (``"a" "b"``: two); None where
    they cannot be told apart."""
    if simple_string(file, node):
        return [node.value]
    try:
        tokens = [t.string for t in tokenize.generate_tokens(io.StringIO(literal_text(file, node)).readline) if t.type == tokenize.STRING]
        return [ast.literal_eval(t) for t in tokens]
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None


def requirement_literal(file: AstFile, facts: ProjectFacts) -> bool:
    """Could the file's kernel index be filled by what no import shows (``_Collector``): a
    literal naming ONNX Runtime's CUDA provider or a CUDA-only requirement (``providers``), an
    import spelled as a call of a CUDA-only module (``dynamic_import``), a hub kernel (an import
    of ``kernels``)? Each literal part of an implicit concatenation is read alone, as libcst
    reads it."""
    for node in ast.walk(file.tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "ExecutionProvider" not in node.value and "-" not in node.value and not any(c in node.value for c in "<>=~"):
                continue
            parts = _literal_parts(file, node)
            if parts is None:
                return True
            if any(isinstance(p, str) and (p in CUDA_PROVIDERS or _cuda_requirement(p)) for p in parts):
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] == "kernels" for m in modules):
                return True
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in ("import_module", "__import__"):
                first = node.args[0] if node.args else None
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                if describe_module(first.value, facts) is not None:
                    return True
    return False


def _cuda_requirement(value: str) -> bool:
    """``_shared/kernels._cuda_requirement`` on the value (its cheap test on the token skipped:
    a superset)."""
    if "-" not in value and not any(c in value for c in "<>=~"):
        return False
    if _REQUIREMENT.fullmatch(value.strip()) is None:
        return False
    name = value.strip()
    bare = re.split(r"[\[<>=!~\s]", name, maxsplit=1)[0]
    if bare == name and "-" not in name:
        return False
    return cuda_only_package(re.sub(r"[-_.]+", "-", bare).lower()) is not None


def _kernel_import_names(node: ast.Import | ast.ImportFrom, path: str, facts: ProjectFacts) -> set[str]:
    """The names ``_Collector._bind_imports`` (and the decorators of a kernel language) could
    index for this import: each local name it binds to CUDA-only code, and ``local.name`` for a
    module whose names reach a kernel through other modules. A superset where unsure."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        pairs = []
        for alias in node.names:
            full = alias.name
            local = alias.asname if alias.asname is not None else full.split(".")[0]
            pairs.append((local, (full,) if alias.asname is not None else (full.split(".")[0],)))
            if full.split(".")[0] in KERNEL_LANGUAGES:
                found.add(local)
        relative = False
    else:
        if any(a.name == "*" for a in node.names):
            return found
        module = node.module
        relative = node.level > 0
        locals_ = [a.asname if a.asname is not None else a.name for a in node.names]
        if (module or "").split(".")[0] in KERNEL_LANGUAGES:
            found.update(locals_)
        if relative:
            bases = relative_module(path, node.level, module)
            pairs = [(l, tuple(f"{b}.{a.name}" for b in bases)) for l, a in zip(locals_, node.names)]
        elif module:
            pairs = [(l, (f"{module}.{a.name}",)) for l, a in zip(locals_, node.names)]
        else:
            pairs = []
    for local, candidates in pairs:
        if not candidates:
            continue
        hit = False
        if not relative:
            hit = describe_module(candidates[0], facts) is not None or (
                isinstance(node, ast.ImportFrom) and node.module is not None and not facts.kernel_module(node.module)
                and describe_module(node.module, facts) is not None
            )
        else:
            project = project_module(facts, candidates)
            hit = bool(project) and describe_module(project, facts) is not None
        hit = hit or any(facts.sink(c) is not None for c in candidates)
        hit = hit or (bool(facts.selections) and any(facts.selected(c) for c in candidates))
        hit = hit or candidates[0] in CUDA_IPC_CALLS
        if hit:
            found.add(local)
        for c in candidates:
            for name, _ in facts.sinks_in(c) or ():
                found.add(f"{local}.{name}")
    return found


def _hits(dotted: str | None, names: set[str]) -> bool:
    """``KernelIndex.target``: a prefix of the dotted name is indexed."""
    if dotted is None:
        return False
    parts = dotted.split(".")
    return any(".".join(parts[:i]) in names for i in range(len(parts), 0, -1))


def _mentions_kernel(nodes: Sequence[ast.AST], names: set[str]) -> bool:
    for stmt in nodes:
        for n in ast.walk(stmt):
            if isinstance(n, (ast.Name, ast.Attribute)) and _hits(ast_dotted(n), names):
                return True
            if isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name).split(".")[0] in names for a in n.names
            ):
                return True
    return False


class KernelNames:
    """A superset of ``_shared/kernels.kernel_index``'s names for one file, where no word of
    ``KERNEL_WORDS`` and no CUDA requirement literal is written (``requirement_literal`` answers
    that first): the imports it would index, torch's CUDA-only members as spelled, and to a fixed
    point every function (``f`` and ``self.f``), class and module-level name whose code mentions
    one of them. A call of one is a kernel call (``handed_to_kernel``); a test function that
    mentions one runs a kernel (``kernel_test``)."""

    def __init__(self, file: AstFile, facts: ProjectFacts) -> None:
        names: set[str] = set()
        definitions: list[ast.AST] = []
        for node in ast.walk(file.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= _kernel_import_names(node, file.path, facts)
            elif isinstance(node, ast.Attribute) and node.attr in _TORCH_CUDA_ONLY_MEMBERS:
                dotted = ast_dotted(node)
                if dotted is not None:
                    names.add(dotted)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                definitions.append(node)
        assigns = [s for s in ast.walk(file.tree) if isinstance(s, ast.Assign)]
        changed = bool(names)
        while changed:
            changed = False
            for d in definitions:
                keys = {d.name} if isinstance(d, ast.ClassDef) else {d.name, f"self.{d.name}"}
                if keys <= names:
                    continue
                if _mentions_kernel([*d.body, *d.decorator_list], names):
                    names |= keys
                    changed = True
            for a in assigns:
                bound = {t.id for t in a.targets if isinstance(t, ast.Name)}
                if bound - names and _mentions_kernel([a.value], names):
                    names |= bound
                    changed = True
        self.names = names

    def __bool__(self) -> bool:
        return bool(self.names)

    def call(self, call: ast.Call) -> bool:
        func = call.func.value if isinstance(call.func, ast.Subscript) else call.func
        return _hits(ast_dotted(func), self.names)


_CONVERSIONS = frozenset({"device", "to"})


def handed_to_kernel(ctx: AstWalk, node: object, kernels: KernelNames) -> bool:
    """Could ``_shared/kernel_gates.handed_to_kernel`` find a kernel for this value? Handed as
    an argument (through ``torch.device(...)`` / ``.to(...)``, three hops) to a call of an indexed
    name, or bound in a function to a name that the function hands to any indexed or own call."""
    if not kernels:
        return False
    return _handed(ctx, list(ctx.ancestors), node, kernels, 3) or _handed_by_name(ctx, node, kernels)


def _handed(ctx: AstWalk, ancestors: list[object], node: object, kernels: KernelNames, hops: int) -> bool:
    found = value_user(ctx.file, ancestors, node)
    if found is None:
        return False
    j, _ = found
    arg, call = ancestors[j], ancestors[j - 1] if j >= 1 else None
    if not (isinstance(arg, ArgNode) and isinstance(call, ast.Call)):
        return False
    if kernels.call(call):
        return True
    func = call.func
    terminal = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return bool(hops) and terminal in _CONVERSIONS and _handed(ctx, ancestors[: j - 1], call, kernels, hops - 1)


def _handed_by_name(ctx: AstWalk, node: object, kernels: KernelNames) -> bool:
    ancestors = ctx.ancestors
    child = node
    for i in range(len(ancestors) - 1, -1, -1):
        anc = ancestors[i]
        if isinstance(anc, ast.Assign):
            if child is not anc.value:
                return False
            func = next((a for a in reversed(ancestors[:i]) if isinstance(a, _FUNCTIONS)), None)
            if func is None:
                return False
            # libcst's function is the nearest `def` above the statement (`_enclosing_function`).
            names = {t.id for t in anc.targets if isinstance(t, ast.Name)}
            if not names:
                return False
            # The file's own functions that reach a kernel are indexed names too (`KernelNames`),
            # so a call of one counts here as `_KernelArguments` counts it.
            for stmt in func.body:
                for call in ast.walk(stmt):
                    if isinstance(call, ast.Call) and kernels.call(call) and any(
                        isinstance(n, ast.Name) and n.id in names for a in ctx.args(call) for n in ast.walk(a.value)
                    ):
                        return True
            return False
        if isinstance(anc, (ast.stmt, ast.Lambda)):
            return False
        child = anc
    return False


def kernel_test(ctx: AstWalk, kernels: KernelNames) -> bool:
    """Could ``_shared/consumers.kernel_test`` find a kernel? The innermost function is a test,
    a set-up method or a pytest fixture, and the file indexes anything."""
    if not kernels:
        return False
    func = next((a for a in reversed(ctx.ancestors) if isinstance(a, _FUNCTIONS)), None)
    if func is None:
        return False
    fixture = any(ctx.qualname(d.func if isinstance(d, ast.Call) else d) == "pytest.fixture" for d in func.decorator_list)
    return func.name.startswith("test") or func.name in SETUP_METHODS or fixture


__all__ += ["KernelNames", "handed_to_kernel", "kernel_test", "says_device", "value_user"]
