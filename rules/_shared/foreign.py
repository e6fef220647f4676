"""Another accelerator's code: the branches a test for XPU, MPS, HPU, NPU, ROCm or IPEX selects.

``elif x.device.type == "mps": torch.mps.synchronize()`` runs on a Mac, never on a CUDA machine
nor on Trainium: rewriting the CUDA names inside such a branch breaks that accelerator and does
nothing for Trainium (a ROCm branch under ``if torch.version.hip:`` calls ``torch.cuda`` because
HIP answers to that name). ``foreign_branches`` names the code such a test selects; CN112 hands
it to the engine as the report's ``fences``, and no other rule's report inside it is kept.

A test is foreign when it holds only on another accelerator: a comparison with a device name of
one (``device.type == "xpu"``, ``"mps" in str(device)``, ``device.type in ("xpu", "hpu")`` —
not ``in ("cuda", "mps")``, which CUDA passes), an availability probe of one
(``torch.xpu.is_available()``, ``is_torch_npu_available()``), ``torch.version.hip``, or
``hasattr(torch, "npu")``; ``and`` keeps it foreign if one side is, ``or`` only if both are.
"""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.python import dotted_name

__all__ = ["FOREIGN_MODULES", "FOREIGN_WORDS", "foreign_branches", "foreign_test"]

# Device types of other accelerators. Not "xla": torch-xla is also how older Neuron SDKs
# reached Trainium, so its branches may be the very path the port wants.
_DEVICES = frozenset({"xpu", "mps", "hpu", "npu", "mlu", "musa", "ipu", "dml", "privateuseone"})
# Modules of other accelerators: their availability probes and the names an adapter assigns.
FOREIGN_MODULES = (
    "torch.xpu", "torch.mps", "torch.backends.mps", "torch.hpu", "torch.npu", "torch.mlu",
    "torch_npu", "torch_mlu", "torch_musa", "intel_extension_for_pytorch", "habana_frameworks",
    "torch_directml",
)
# Words without which a file holds no foreign test (cheap, before any walk).
FOREIGN_WORDS = re.compile(r"xpu|mps|hpu|npu|mlu|musa|ipex|hip|habana|directml", re.IGNORECASE)
# ``is_torch_xpu_available()`` (transformers), ``is_xpu_available()`` (accelerate),
# ``is_ipex_available()``, ``is_hpu_available()``: projects copy these helpers, so the last name
# decides, wherever it is defined.
# Flags set from such a probe (``HAS_XPU``, ``use_ipex``) are read the same way.
_PROBE_NAME = re.compile(
    r"(?:is|has|use|with)_(?:torch_)?(?:xpu|mps|hpu|npu|mlu|musa|ipex|habana|rocm|hip)(?:_available|_built|_enabled)?",
    re.IGNORECASE,
)


def calls_foreign_probe(name: str) -> bool:
    """Does a call of the qualified ``name`` ask for another accelerator (``is_xpu_available()``,
    ``torch.mps.is_available()``)? Shared by the visitor's reading and foreign_ast's."""
    if _PROBE_NAME.fullmatch(name.rsplit(".", 1)[-1]):
        return True
    return name.endswith((".is_available", ".is_built", ".device_count")) and name.rsplit(".", 1)[0] in FOREIGN_MODULES


_STRING_METHODS = frozenset({"startswith", "endswith", "__contains__"})


def _device_word(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        if isinstance(value, str):
            return value.split(":", 1)[0].strip().lower()
    return None


def _all_foreign(node: cst.BaseExpression) -> bool:
    """A device name of another accelerator, or a literal tuple/list/set of only those."""
    if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
        words = [_device_word(e.value) for e in node.elements]
        return bool(words) and all(w in _DEVICES for w in words)
    if isinstance(node, cst.Call) and dotted_name(node.func) in ("torch.device", "device"):
        return bool(node.args) and _device_word(node.args[0].value) in _DEVICES
    return _device_word(node) in _DEVICES


def _qualified(node: cst.BaseExpression, qualname) -> str | None:  # noqa: ANN001
    return qualname(node) or dotted_name(node)


def _foreign_atom(node: cst.BaseExpression, qualname) -> bool | None:  # noqa: ANN001
    """True when ``node`` holds only on another accelerator, False when only off it
    (``device.type != "mps"``, ``torch.version.hip is None``), None when it says neither."""
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        op = node.comparisons[0].operator
        right = node.comparisons[0].comparator
        negating = isinstance(op, (cst.NotEqual, cst.NotIn, cst.IsNot))
        if isinstance(op, (cst.Is, cst.IsNot)) and isinstance(right, cst.Name) and right.value == "None":
            # ``torch.version.hip is not None``: ROCm; ``is None``: not ROCm.
            inner = _foreign_atom(node.left, qualname)
            return None if inner is None else (inner if negating else not inner)
        if isinstance(op, (cst.Equal, cst.NotEqual, cst.In, cst.NotIn)) and (
            _all_foreign(right) or (isinstance(op, (cst.Equal, cst.NotEqual)) and _all_foreign(node.left))
        ):
            return not negating
        if isinstance(op, (cst.In, cst.NotIn)) and _device_word(node.left) in _DEVICES:
            # ``"xpu" in str(device)``; not ``"mps" in ("cuda", "mps")`` (a literal right side).
            if not isinstance(right, (cst.Tuple, cst.List, cst.Set)):
                return not negating
        return None
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = _foreign_atom(node.expression, qualname)
        return None if inner is None else not inner
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value == "hasattr" and len(node.args) == 2:
            owner = _qualified(node.args[0].value, qualname)
            attr = _device_word(node.args[1].value)
            return True if owner in ("torch", "torch.backends") and attr in _DEVICES else None
        if isinstance(func, cst.Attribute) and func.attr.value in _STRING_METHODS and node.args:
            return True if _device_word(node.args[0].value) in _DEVICES else None
        name = _qualified(func, qualname)
        return True if name is not None and calls_foreign_probe(name) else None
    if isinstance(node, (cst.Attribute, cst.Name)):
        name = _qualified(node, qualname)
        if name == "torch.version.hip":
            return True
        if name is not None and _PROBE_NAME.fullmatch(name.rsplit(".", 1)[-1]):
            return True  # a flag set from a probe (``is_xpu_available = ...``)
    if isinstance(node, cst.BooleanOperation):
        left = _foreign_atom(node.left, qualname)
        right = _foreign_atom(node.right, qualname)
        if isinstance(node.operator, cst.And):
            # ``xpu and x``: true only on XPU; ``not xpu and x``: says nothing of where it is false.
            return True if True in (left, right) else None
        # ``xpu or mps``: true only off CUDA; ``not xpu or not mps``: false only on foreign.
        if left is True and right is True:
            return True
        if left is False and right is False:
            return False
        return None
    return None


def foreign_test(node: cst.BaseExpression, qualname) -> bool | None:  # noqa: ANN001
    """Does the test ``node`` hold only on another accelerator (True), only off it (False)?

    ``qualname`` resolves a dotted expression through the imports in scope (``Rule.qualname``).
    """
    return _foreign_atom(node, qualname)


def foreign_branches(node: cst.If | cst.IfExp, qualname) -> tuple[cst.CSTNode, ...]:  # noqa: ANN001
    """The code of ``node`` that runs only on another accelerator: its body where its test holds
    only there, its ``else``/``elif`` chain where the test fails only there; () otherwise."""
    verdict = foreign_test(node.test, qualname)
    if verdict is None:
        return ()
    if verdict:
        return (node.body,)
    orelse = node.orelse
    if orelse is None:
        return ()
    return (orelse.body if isinstance(orelse, cst.Else) else orelse,)
