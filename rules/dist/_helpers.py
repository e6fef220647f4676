"""Helpers of the distributed family (CN4xx): backend names and environment keys.

Two questions come up in several CN4xx rules and are answered here once:

* *How does the target spell the process-group backend?* ``"neuron"`` for the neuron target;
  for ``--target accelerator`` the backend torch registers for the current accelerator.
* *Is this string literal an environment-variable key, and is it written or read?* Answered
  in ``rules/_shared/env.py`` (CN207 asks it too) and re-exported here.
"""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Rule

from .._shared.env import EnvAccess, EnvSite, env_keyword_site, env_site
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
