"""Environment keys in Python code: is this string literal a key of ``os.environ``, and how used?

``os.environ[K] = v``, ``os.environ.setdefault(K, v)``, ``os.putenv(K, v)``, ``{K: v}`` env
dicts, ``update(K=v)`` keywords, and the read forms (``os.environ.get(K)``, ``K in os.environ``).
Shared by the rules that handle CUDA_VISIBLE_DEVICES (CN405), NCCL_* (CN406) and the CUDA
runtime's own variables (CN207).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Rule, text_callees_of_source

__all__ = ["CUDA_ENV_RE", "EnvAccess", "EnvSite", "env_keyword_site", "env_site"]

# Variables the CUDA runtime, cuDNN/cuBLAS or PyTorch's CUDA code read. Named one by one (plus
# library prefixes): a script's own `CUDA_FLAG="--cuda"` or `USE_CUDA=0` only has "cuda" in
# its name and is not a CUDA setting. CUDA_VISIBLE_DEVICES is not here: CN405/CN701 port it.
CUDA_ENV_RE = re.compile(
    r"CUDA_(?:LAUNCH_BLOCKING|DEVICE_ORDER|DEVICE_MAX_CONNECTIONS|MODULE_LOADING|HOME|PATH|ROOT"
    r"|AUTO_BOOST|FORCE_PTX_JIT|DISABLE_PTX_JIT|CACHE_\w+|MPS_\w+)"
    r"|PYTORCH_CUDA_\w+|PYTORCH_NO_CUDA_MEMORY_CACHING|PYTORCH_NVML_BASED_CUDA_CHECK|TORCH_CUDA_\w+"
    r"|TORCH_CUDNN_\w+|CUDNN_\w+|CUBLAS_\w+|CUBLASLT_\w+"
)


class EnvAccess(str, enum.Enum):
    WRITE = "write"
    READ = "read"
    DELETE = "delete"


@dataclass(frozen=True)
class EnvSite:
    """Where an environment key literal sits.

    ``node`` is the smallest node a fix must replace to change both key and value; ``value`` the
    value written (WRITE) or the default read (READ), if any; ``parsed`` is True for reads whose
    result is immediately parsed as a comma list (``os.environ[K].split(",")``).
    """

    access: EnvAccess
    node: cst.CSTNode
    value: cst.BaseExpression | None = None
    parsed: bool = False


_WRITE_CALLS = frozenset({"setdefault", "putenv"})
_READ_CALLS = frozenset({"get", "getenv", "pop"})
_DELETE_CALLS = frozenset({"unsetenv"})


def _call_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def env_site(rule: Rule, key: cst.SimpleString) -> EnvSite | None:
    """How the string literal ``key`` (just visited) is used as an environment key, if it is.

    Only key positions count: the same text in a log message or a docstring is not a key.
    The caller has already checked the literal's value, so this costs a few ancestor looks.
    """
    anc = rule.context.ancestors
    if not anc:
        return None
    parent = anc[-1]
    # os.environ[K] (any mapping: env copies handed to subprocess count as well)
    if isinstance(parent, cst.Index) and len(anc) >= 3 and isinstance(anc[-3], cst.Subscript):
        subscript = anc[-3]
        if len(subscript.slice) != 1:
            return None
        holder = anc[-4] if len(anc) >= 4 else None
        if isinstance(holder, cst.AssignTarget) and len(anc) >= 5 and isinstance(anc[-5], cst.Assign):
            assign = anc[-5]
            if len(assign.targets) == 1:
                return EnvSite(EnvAccess.WRITE, assign, assign.value)
            return EnvSite(EnvAccess.WRITE, subscript)
        if isinstance(holder, cst.Del):
            return EnvSite(EnvAccess.DELETE, subscript)
        parsed = isinstance(holder, cst.Attribute) and holder.value is subscript and holder.attr.value == "split"
        return EnvSite(EnvAccess.READ, subscript, parsed=parsed)
    # os.environ.get(K, default), os.getenv(K), os.environ.setdefault(K, v), os.putenv(K, v)
    if isinstance(parent, cst.Arg) and parent.keyword is None and len(anc) >= 2 and isinstance(anc[-2], cst.Call):
        call = anc[-2]
        if not call.args or call.args[0] is not parent:
            return None
        name = _call_name(call)
        value = call.args[1].value if len(call.args) > 1 and call.args[1].keyword is None else None
        if name in _WRITE_CALLS:
            return EnvSite(EnvAccess.WRITE, call, value)
        if name in _READ_CALLS:
            holder = anc[-3] if len(anc) >= 3 else None
            parsed = isinstance(holder, cst.Attribute) and holder.value is call and holder.attr.value == "split"
            return EnvSite(EnvAccess.READ, call, value, parsed=parsed)
        if name in _DELETE_CALLS:
            return EnvSite(EnvAccess.DELETE, call)
        return None
    # {"CUDA_VISIBLE_DEVICES": "0,1"} -- an environment handed to a subprocess
    if isinstance(parent, cst.DictElement) and parent.key is key:
        return EnvSite(EnvAccess.WRITE, parent, parent.value)
    # "CUDA_VISIBLE_DEVICES" in os.environ
    if isinstance(parent, cst.Comparison) and parent.left is key and len(parent.comparisons) == 1:
        op = parent.comparisons[0].operator
        if isinstance(op, (cst.In, cst.NotIn)) and not _text_read(rule, anc, parent.comparisons[0].comparator):
            return EnvSite(EnvAccess.READ, key)
    return None


# What reads a file's or a function's text: pathlib's `read_text`, inspect's `getsource`, and
# what a program printed as pytest's capsys / capfd give it back (`readouterr()`, its `.out` /
# `.err`); the residual pass reads the same calls, `kinds/_leftover_python._TEXT_READS`.
_TEXT_READS = frozenset({"read_text", "getsource", "readouterr"})
_CAPTURED = frozenset({"out", "err"})


def _text_read(rule: Rule, ancestors, searched: cst.BaseExpression) -> bool:  # noqa: ANN001
    """Whether ``searched`` is a name its function binds once, to a text read from a file or from
    source (``content = SETUP_SH.read_text()``, then ``assert "CUDA_VISIBLE_DEVICES" in content``:
    unsloth's installer tests look for the word in a script's text, no environment is read), or
    to the result of a call the module searches elsewhere for a word no environment key can be
    (``message = self._message(...)`` and ``"UNSLOTH_LLAMA_CPP_BACKEND=cpu" in message``:
    ``text_callees``)."""
    if isinstance(searched, cst.Attribute) and searched.attr.value in _CAPTURED:
        # `"CUDA_DEVICE_ORDER" not in captured.out`, `in capsys.readouterr().err`: a printed log
        head = searched.value
        if isinstance(head, cst.Call):
            return isinstance(head.func, cst.Attribute) and head.func.attr.value == "readouterr"
        searched = head
    if not isinstance(searched, cst.Name):
        return False
    func = next((a for a in reversed(ancestors) if isinstance(a, cst.FunctionDef)), None)
    if func is None:
        return False
    finder = _Bindings(searched.value)
    func.body.visit(finder)
    if finder.stores != 1 or finder.callee is None:
        return False
    return finder.callee in _TEXT_READS or finder.callee in text_callees_of_source(rule.context.source)


class _Bindings(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.stores = 0
        self.callee: str | None = None  # the last name of the call the name is bound to

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # a nested function's names are its own

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.stores += 1
        elif any(isinstance(n, cst.Name) and n.value == self.name for n in _names_in(node.target)):
            self.stores += 2  # unpacked: not one text

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == self.name:
            call = node.value
            if isinstance(call, cst.Attribute) and call.attr.value in _CAPTURED:
                call = call.value  # `out = capsys.readouterr().out`
            func = call.func if isinstance(call, cst.Call) else None
            self.callee = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.stores += 1

    def visit_AsName(self, node: cst.AsName) -> None:
        if any(isinstance(n, cst.Name) and n.value == self.name for n in _names_in(node.name)):
            self.stores += 2

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if isinstance(node.target, cst.Name) and node.target.value == self.name:
            self.stores += 2

    def visit_For(self, node: cst.For) -> None:
        if any(isinstance(n, cst.Name) and n.value == self.name for n in _names_in(node.target)):
            self.stores += 2

    def visit_Param(self, node: cst.Param) -> None:
        if node.name.value == self.name:
            self.stores += 2


def _names_in(target: cst.BaseExpression) -> list[cst.CSTNode]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names_in(e.value)]
    return [target]


def env_keyword_site(arg: cst.Arg) -> EnvSite:
    """``os.environ.update(K=v)`` / ``dict(K=v)``: the keyword argument is the key."""
    return EnvSite(EnvAccess.WRITE, arg, arg.value)
