"""Helpers of the distributed family (CN4xx): backend names and environment keys.

Two questions come up in several CN4xx rules and are answered here once:

* *How does the target spell the process-group backend?* ``"neuron"`` for the neuron target;
  for ``--target accelerator`` the backend torch registers for the current accelerator.
* *Is this string literal an environment-variable key, and is it written or read?*
  ``os.environ[K] = v``, ``os.environ.setdefault(K, v)``, ``os.putenv(K, v)``, ``{K: v}`` env
  dicts, ``update(K=v)`` keywords, and the read forms (``os.environ.get(K)``, ``K in os.environ``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Rule

from .._shared.target import NEURON, Imports

__all__ = [
    "ACCELERATOR_BACKEND_EMITS",
    "EnvAccess",
    "EnvSite",
    "backend_expr",
    "env_site",
    "env_keyword_site",
    "is_backend_named",
]

# torch.distributed.get_default_backend_for_device was added in late 2024 (pytorch PR 140536) and
# first shipped in torch 2.6, the release torch.accelerator starts with; older torch cannot spell
# "the accelerator's backend" portably, so the finding stays a report there.
_MIN_TORCH_DEFAULT_BACKEND = (2, 6)

ACCELERATOR_BACKEND_EMITS = (
    "torch.distributed.get_default_backend_for_device",
    "torch.accelerator.current_accelerator",
)


def backend_expr(
    rule: Rule, quote_like: cst.BaseExpression | None = None
) -> tuple[cst.BaseExpression, Imports] | None:
    """The process-group backend of the target, or None when the target cannot express it.

    For the accelerator target the expression falls back to ``"cpu"`` when there is no
    accelerator: ``current_accelerator()`` returns None there and
    ``get_default_backend_for_device(None)`` raises, which would crash a CPU-only run at the
    point where the original merely assigned a string (nanoGPT keeps ``backend = "nccl"`` at
    module level). On CPU the fallback yields ``"gloo"``, the backend torch maps to "cpu".
    """
    if rule.context.settings.target == NEURON:
        q = "'" if isinstance(quote_like, cst.SimpleString) and quote_like.value.lstrip("rRuU").startswith("'") else '"'
        return cst.SimpleString(f"{q}neuron{q}"), ()
    if rule.context.settings.min_torch < _MIN_TORCH_DEFAULT_BACKEND:
        return None
    default = rule.spell("torch.distributed.get_default_backend_for_device")
    current = rule.spell("torch.accelerator.current_accelerator")
    if default is None or current is None:
        return None
    (default_func, imports_a), (current_func, imports_b) = default, current
    device = cst.BooleanOperation(
        left=cst.Call(func=current_func), operator=cst.Or(), right=cst.SimpleString('"cpu"')
    )
    return cst.Call(func=default_func, args=[cst.Arg(device)]), tuple(dict.fromkeys(imports_a + imports_b))


def _name_of(node: cst.BaseExpression) -> str | None:
    """The last name of ``node`` as a reader would say it: ``args.dist_backend`` -> dist_backend."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    if isinstance(node, cst.Call):
        return _name_of(node.func)  # dist.get_backend(), pg.backend()
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            value = index.value.evaluated_value
            return value if isinstance(value, str) else None  # cfg["dist_backend"]
    return None


def is_backend_named(node: cst.BaseExpression) -> bool:
    """True for names, attributes, calls and string-keyed lookups that say "backend"."""
    name = _name_of(node)
    return name is not None and "backend" in name.lower()


# -- environment keys ------------------------------------------------------------------------------


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
        if isinstance(op, (cst.In, cst.NotIn)):
            return EnvSite(EnvAccess.READ, key)
    return None


def env_keyword_site(arg: cst.Arg) -> EnvSite:
    """``os.environ.update(K=v)`` / ``dict(K=v)``: the keyword argument is the key."""
    return EnvSite(EnvAccess.WRITE, arg, arg.value)
