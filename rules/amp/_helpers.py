"""Helpers of the automatic mixed precision family (CN3xx): the AMP names, the AMP dtype."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from cuda2neuron.core import Rule

__all__ = [
    "AMP_DTYPE_NAMES",
    "AUTOCAST",
    "FLOAT16_NAMES",
    "LEGACY_AUTOCAST",
    "LEGACY_SCALER",
    "LIBRARY_SCALERS",
    "LibraryScaler",
    "SCALER",
    "dtype_expr",
    "is_float16",
    "mentions_float16",
    "wakes_on_cuda",
]

AMP_DTYPE_NAMES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16"}
LEGACY_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
LEGACY_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
FLOAT16_NAMES = frozenset({"torch.float16", "torch.half"})


@dataclass(frozen=True)
class LibraryScaler:
    """A library's GradScaler whose ``device`` defaults to ``"cuda"``: its parameters in order,
    and whether it can be switched off (``enabled=``)."""

    params: tuple[str, ...]
    switchable: bool
    note: str = ""


# Library GradScalers whose device defaults to CUDA (signatures read from torch 2.13 and timm's
# timm/utils/cuda.py). On a host without CUDA they build a CUDA scaler that disables itself with
# a warning, so a float16 port silently loses its loss scaling. CN304 gives them torch's policy.
_SHARDED = LibraryScaler(
    ("device", "init_scale", "backoff_factor", "growth_factor", "growth_interval", "enabled", "process_group"), True
)
_TIMM = LibraryScaler(
    ("device",),
    False,
    # timm's NativeScaler takes `device` since timm 1.0.11 (2024-10) and has no `enabled`.
    "timm's NativeScaler takes `device=` since timm 1.0.11 and has no `enabled=` switch, so it "
    "stays live (under bfloat16 its power-of-two scaling changes no value)",
)
LIBRARY_SCALERS: dict[str, LibraryScaler] = {
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": _SHARDED,
    "timm.utils.NativeScaler": _TIMM,
    "timm.utils.cuda.NativeScaler": _TIMM,
}
LIBRARY_SCALER_NAMES = frozenset(q.rsplit(".", 1)[1] for q in LIBRARY_SCALERS)


def dtype_expr(rule: Rule) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
    """``torch.bfloat16`` / ``torch.float16`` per settings.amp_dtype, spelled with the user's alias."""
    return rule.spell(AMP_DTYPE_NAMES[rule.context.settings.amp_dtype])


def is_float16(rule: Rule, expr: cst.BaseExpression) -> bool:
    return rule.qualname(expr) in FLOAT16_NAMES


# String values that select float16 in code (a config default, an argparse choice, a dtype
# name): the whole value is the word. Prose ("use half precision") is not code.
_FLOAT16_STRINGS = frozenset({"float16", "fp16", "half", "torch.float16", "torch.half", "f16"})
_FLOAT16_MEMBERS = frozenset({"float16", "half"})


# Calls whose result is a copy or a freshly loaded object: `.half()` on it makes a float16 copy
# for a checkpoint or an export (yolov5's `deepcopy(de_parallel(model)).half()` saved each epoch,
# `attempt_load(f, device).half()` for a last evaluation), never the trained model's gradients.
_COPYING = frozenset({"deepcopy", "copy", "clone", "detach", "state_dict"})
_BACK_TO_FLOAT32 = frozenset({"float"})


def _copy_or_loaded(receiver: cst.BaseExpression) -> bool:
    """Whether ``receiver`` (what ``.half()`` is called on) is a copy or a loaded object: a call
    of one of ``_COPYING`` or of a name holding "load" anywhere in its chain."""
    node: cst.BaseExpression = receiver
    while True:
        if isinstance(node, cst.Call):
            func = node.func
            last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if last in _COPYING or "load" in last.lower():
                return True
            node = func.value if isinstance(func, cst.Attribute) else func
            if isinstance(node, cst.Name):
                return False
        elif isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        else:
            return False


class _Float16InCode(cst.CSTVisitor):
    """Looks for float16 in the code of a module: ``torch.float16`` / ``torch.half`` (any alias,
    and ``from torch import float16``), a ``.half()`` call, or a string that is a float16 name.
    Comments, docstrings and prose strings (help texts, log lines) never count."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.found = False
        self.torch_names: set[str] = set()
        self.float16_names: set[str] = set()
        self._round_trips: set[int] = set()

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            if self.rule.context.code(alias.name) == "torch":
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    self.torch_names.add(bound.value)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        if self.rule.context.code(node.module) != "torch":
            return
        for alias in node.names:
            if isinstance(alias.name, cst.Name) and alias.name.value in _FLOAT16_MEMBERS:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if isinstance(bound, cst.Name):
                    self.float16_names.add(bound.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value not in _FLOAT16_MEMBERS:
            return
        if node.attr.value == "half" and not isinstance(node.value, cst.Name):
            return  # `x.half` of a tensor expression: the call is checked below
        if isinstance(node.value, cst.Name) and (node.value.value in self.torch_names or node.value.value == "torch"):
            self.found = True

    def visit_Call(self, node: cst.Call) -> bool:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "half" and not node.args:
            if not _copy_or_loaded(func.value) and id(node) not in self._round_trips:
                self.found = True  # tensor.half() / model.half()
        # `x.half().float()`: a precision round trip, the result is float32 again
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value in _BACK_TO_FLOAT32
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Attribute)
            and func.value.func.attr.value == "half"
        ):
            self._round_trips.add(id(func.value))
        return not self.found

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.float16_names:
            self.found = True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = node.evaluated_value
        if isinstance(value, str) and value.strip().lower() in _FLOAT16_STRINGS:
            self.found = True


def mentions_float16(rule: Rule) -> bool:
    """Whether the module's code may run float16 (``torch.float16``, ``torch.half``, ``.half()``,
    a string such as ``"float16"`` / ``"fp16"`` that selects it).

    Computed once per file, from the code, never from prose: a help text or a comment about
    "half precision" does not make a run float16. A GradScaler is only made a no-op where
    nothing in its file may run float16: unscaled float16 gradients underflow.
    """
    cached = getattr(rule, "_mentions_float16", None)
    if cached is None:
        finder = _Float16InCode(rule)
        rule.context.module.visit(finder)
        cached = finder.found
        rule._mentions_float16 = cached  # type: ignore[attr-defined]
    return cached


def wakes_on_cuda(cls: type[Rule], code: bytes) -> bool:  # noqa: ARG001 - a classmethod's cls
    """The ``wakes`` of the autocast rules that need CUDA spelled in the file (CN301's
    ``torch.cuda.amp``, CN302's ``"cuda"`` device, CN303's "cuda" literal): ``autocast`` alone
    is in every file of a model library that casts by device (``autocast(x.device.type)``)."""
    return b"cuda" in code
