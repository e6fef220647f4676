"""Helpers of the automatic mixed precision family (CN3xx): the AMP names, the AMP dtype."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Rule

__all__ = [
    "AMP_DTYPE_NAMES",
    "AUTOCAST",
    "FLOAT16_NAMES",
    "LEGACY_AUTOCAST",
    "LEGACY_SCALER",
    "SCALER",
    "dtype_expr",
    "is_float16",
    "mentions_cuda_literal",
    "mentions_float16",
]

AMP_DTYPE_NAMES = {"bfloat16": "torch.bfloat16", "float16": "torch.float16"}
LEGACY_AUTOCAST = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.amp.autocast_mode.autocast"})
LEGACY_SCALER = frozenset({"torch.cuda.amp.GradScaler", "torch.cuda.amp.grad_scaler.GradScaler"})
SCALER = frozenset({"torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler"})
FLOAT16_NAMES = frozenset({"torch.float16", "torch.half"})


def dtype_expr(rule: Rule) -> tuple[cst.BaseExpression, tuple[tuple[str, str | None], ...]] | None:
    """``torch.bfloat16`` / ``torch.float16`` per settings.amp_dtype, spelled with the user's alias."""
    return rule.spell(AMP_DTYPE_NAMES[rule.context.settings.amp_dtype])


def is_float16(rule: Rule, expr: cst.BaseExpression) -> bool:
    return rule.qualname(expr) in FLOAT16_NAMES


def mentions_cuda_literal(rule: Rule) -> bool:
    """Whether the module still holds a ``"cuda..."`` string literal (computed once per file)."""
    cached = getattr(rule, "_mentions_cuda", None)
    if cached is None:
        code = rule.context.source
        cached = "'cuda" in code or '"cuda' in code
        rule._mentions_cuda = cached  # type: ignore[attr-defined]
    return cached


_FLOAT16_WORDS = re.compile(r"float16|\bhalf\b")


def mentions_float16(rule: Rule) -> bool:
    """Whether the module mentions float16 (``torch.float16``, ``"float16"``, ``torch.half``, ``.half()``).

    Computed once per file. A GradScaler is only made a no-op where nothing in its file may run
    float16: unscaled float16 gradients underflow.
    """
    cached = getattr(rule, "_mentions_float16", None)
    if cached is None:
        cached = _FLOAT16_WORDS.search(rule.context.source) is not None
        rule._mentions_float16 = cached  # type: ignore[attr-defined]
    return cached
