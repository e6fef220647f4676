"""CN805: a NumPy array moved to the device, indexed there, then cast (float64 on the device)."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.detector import AstDetector
from .._shared.names import call_qualname

__all__ = ["Float64IndexedOnDevice"]

# What every report spells: a ``.to(`` call, and ``.float()`` right after a subscript's ``]``
# (closing parentheses, blanks, a blanked comment or a backslash line end between them).
_MOVE = re.compile(rb"\.[\s\\]*to[\s\\]*\(")
_CAST_AFTER_INDEX = re.compile(rb"\][\s)\\]*\.[\s\\]*float[\s\\]*\(")

_GUIDANCE = (
    "NumPy arrays are float64 by default: `torch.from_numpy(a).to(device)[t].float()` moves the whole "
    "array to the device in float64 every call, and the device has no float64. Cast on the host "
    "first: `torch.from_numpy(a).float().to(device)[t]` gives the same values."
)


def _device_only(call: cst.Call) -> bool:
    """Does ``.to(...)`` only name a device? ``.to(other_tensor)`` or a dtype would also cast, and
    the cast moved before it would then be undone."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if arg.keyword is not None:
        return arg.keyword.value == "device"
    value = arg.value
    # A positional device: a string, `x.device`, or a name `device`; a tensor or dtype is neither.
    return (isinstance(value, cst.SimpleString) or (isinstance(value, cst.Attribute) and value.attr.value == "device")
            or (isinstance(value, cst.Name) and value.value == "device"))


class Float64IndexedOnDevice(Rule):
    """
    ## What it does
    Reports ``torch.from_numpy(a).to(device)[t].float()``: a NumPy array moved to the device,
    indexed there, and cast to float32 only then. The safe fix casts on the host:
    ``torch.from_numpy(a).float().to(device)[t]``.

    ## Why is this bad?
    NumPy arrays are float64 unless told otherwise, and diffusion codebases keep their noise
    schedules so and read them every step this way. Each call moves a float64 tensor to the
    device, which has no float64 (it is downcast there), and ``validate`` counts a float64 op per
    call: a correct port WARNs until the line is found and edited by hand.

    ## Example
    ```python
    out = torch.from_numpy(arr).to(device=t.device)[t].float()
    ```
    becomes
    ```python
    out = torch.from_numpy(arr).float().to(device=t.device)[t]
    ```

    ## Fix safety
    Safe: indexing selects elements and a device move copies them, so a cast to float32 gives the
    same values before them as after (for any dtype of the array, integer ones included). Only a
    ``.to(...)`` that names nothing but a device is rewritten: ``.to(other)`` with a tensor or a
    dtype casts too, and is left alone.
    """

    code = "CN805"
    name = "float64-indexed-on-device"
    fixes = frozenset({Safety.SAFE})
    triggers = ("from_numpy",)
    VALID = (
        "import torch\nout = torch.from_numpy(arr).float().to(device=t.device)[t]\n",  # already cast first
        "import torch\nout = torch.from_numpy(arr).to(t)[i].float()\n",  # .to(tensor) casts too
        "import torch\nout = torch.from_numpy(arr).to(device, torch.float16)[i].float()\n",
        "import torch\nout = torch.from_numpy(arr)[i].float()\n",  # never on the device
        "import torch\nout = x.to(device)[i].float()\n",  # not a NumPy array
    )
    INVALID = (
        Invalid(
            "import torch\nout = torch.from_numpy(arr).to(device=t.device)[t].float()\n",
            "import torch\nout = torch.from_numpy(arr).float().to(device=t.device)[t]\n",
        ),
        Invalid(
            'import torch as th\nout = th.from_numpy(self.betas).to("cuda")[idx].float()\n',
            'import torch as th\nout = th.from_numpy(self.betas).float().to("cuda")[idx]\n',
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        # torch.from_numpy is common in image pipelines (127 of diffusers' files), this chain
        # is not: a file without its two pieces was parsed for nothing.
        return _CAST_AFTER_INDEX.search(code) is not None and _MOVE.search(code) is not None

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: every report is a ``.float()`` on a subscript of ``.to(...)`` on a call that
        resolves to ``torch.from_numpy`` (and carries a safe fix: an edit, libcst's to write), so
        a file whose walk meets no such chain gets no finding; unsure at the first one. The wake
        test reads bytes (diffusers: ``.to(`` and ``].float(`` apart in one file)."""
        return None if _Gate(cls, file).reports() is None else []

    def visit_Call(self, node: cst.Call) -> None:
        cast = node.func
        if not (isinstance(cast, cst.Attribute) and cast.attr.value == "float") or node.args:
            return
        indexed = cast.value
        if not isinstance(indexed, cst.Subscript) or not isinstance(indexed.value, cst.Call):
            return
        move = indexed.value
        if not (isinstance(move.func, cst.Attribute) and move.func.attr.value == "to" and _device_only(move)):
            return
        source = move.func.value
        if not (isinstance(source, cst.Call) and call_qualname(self, source) == "torch.from_numpy"):
            return
        cast_first = cst.Call(func=cst.Attribute(value=source, attr=cst.Name("float")))
        replacement = indexed.with_changes(value=move.with_changes(func=move.func.with_changes(value=cast_first)))
        self.report(
            node,
            "a NumPy array (float64 by default) is moved to the device, indexed, and cast only then",
            replacement=replacement,
            safety=Safety.SAFE,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
            description="cast on the host, before the transfer",
        )


class _Gate(AstDetector):
    """``visit_Call`` above on CPython's ``ast``, the device-only test left out (a superset)."""

    def visit_Call(self, node: ast.Call) -> None:
        cast = node.func
        if not (isinstance(cast, ast.Attribute) and cast.attr == "float") or node.args or node.keywords:
            return
        indexed = cast.value
        if not isinstance(indexed, ast.Subscript) or not isinstance(indexed.value, ast.Call):
            return
        move = indexed.value.func
        if isinstance(move, ast.Attribute) and move.attr == "to" and isinstance(move.value, ast.Call):
            if self.ctx.call_qualname(move.value) == "torch.from_numpy":
                from cuda2neuron.python import Unsure

                raise Unsure("a NumPy array moved, indexed, then cast")
