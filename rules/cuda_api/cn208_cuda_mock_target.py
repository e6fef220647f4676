"""CN208: ``mock.patch("torch.cuda.…")`` targets that the port no longer calls."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings
from cuda2neuron.python import dotted_name

from .._shared.detector import AstDetector
from .._shared.strings import string_value

__all__ = ["CudaMockTarget"]

# Callables whose first argument is a dotted import path of the thing they replace.
_PATCHERS = frozenset({"unittest.mock.patch", "mock.patch"})
# `torch.cuda.is_available`, or the same reached through a module that imports torch
# (litgpt's `"litgpt.utils.torch.cuda.device_count"`).
_CUDA_PATH = re.compile(r"(?:[A-Za-z_]\w*\.)*torch\.(?:cuda|backends\.cudnn|backends\.cuda)\.[A-Za-z_][\w.]*")


def _is_cuda_path(value: str | None) -> bool:
    return value is not None and _CUDA_PATH.fullmatch(value) is not None


# Callables that replace an attribute given the object and the attribute's name.
_OBJECT_PATCHERS = frozenset({"unittest.mock.patch.object", "mock.patch.object"})
# A CUDA device as a patch's replacement value: `monkeypatch.setattr("pkg.utils.device_type", "cuda")`.
_CUDA_DEVICE = re.compile(r"cuda(?::\d+)?")


class CudaMockTarget(Rule):
    """
    ## What it does
    Reports tests that replace a CUDA API by its import path: ``mock.patch("torch.cuda.is_available",
    return_value=False)``, ``@patch("torch.cuda.get_device_capability")`` and
    ``monkeypatch.setattr("torch.cuda.device_count", ...)``, also through the module under test
    (``mock.patch("pkg.utils.torch.cuda.device_count")``).

    ## Why is this bad?
    The port calls ``torch.neuron.*`` (or ``torch.accelerator.*``) instead of ``torch.cuda.*``,
    so the patch still succeeds but replaces a function nothing calls any more: the test runs
    the real device path and either fails on a machine without the device or passes without
    testing what it meant to.

    ## Example
    ```python
    @mock.patch("torch.cuda.is_available", return_value=False)
    def test_cpu_fallback(_): ...
    ```
    is reported: patch the name the ported code calls (``"torch.neuron.is_available"`` for the
    neuron target), or patch the project's own device helper.

    ``mock.patch.object(torch.cuda, "device_count")`` and ``monkeypatch.setattr(app.torch.cuda,
    "is_available", ...)`` (the module object and the attribute's name) are reported the same way.
    So is a patch whose replacement is a CUDA device (``monkeypatch.setattr("pkg.utils.device_type",
    "cuda")``): the test fakes a CUDA machine through the project's own device setting.

    ## Fix safety
    Report only: which name the ported code under test calls depends on the rules applied to
    that code (a move, a rewrite into ``torch.accelerator``, or none), which this file does not
    show; retargeting the string blindly could patch a name that does not exist. The test that
    patches (the function the patch is in, or decorates) fakes a CUDA machine, and its device
    values and expectations describe that machine: they stay with the patch, so no safe fix
    moves them alone (InvokeAI's tests kept ``monkeypatch.setattr(torch.cuda, "is_available",
    lambda: True)`` while the expected ``"cuda:0"`` became ``"neuron:0"``).
    """

    code = "CN208"
    name = "cuda-mock-target"
    # The last four: a CUDA device as a literal (a patch's replacement value, see _cuda_replacement).
    triggers = ("torch.cuda", "torch.backends.cudnn.", "torch.backends.cuda.", '"cuda"', "'cuda'", '"cuda:', "'cuda:")
    VALID = (
        'from unittest import mock\nmock.patch("torch.neuron.is_available", return_value=False)\n',
        'from unittest import mock\nmock.patch("os.getcwd")\n',
        'print("torch.cuda.is_available")\n',  # not a patch target
        'x = {"torch.cuda.is_available": 1}\n',
        # A module of the project's own that is merely named like torch's.
        'from unittest import mock\nmock.patch("pkg.mytorch.cuda.helper")\n',
    )
    INVALID = (
        Invalid('from unittest import mock\nwith mock.patch("torch.cuda.is_available", return_value=False):\n    pass\n'),
        Invalid(
            'from unittest.mock import patch\n@patch("torch.cuda.get_device_capability", return_value=(8, 0))\n'
            "def test_cap(_):\n    pass\n"
        ),
        Invalid('import mock\np = mock.patch("torch.backends.cudnn.is_available")\n'),
        Invalid('def test_count(monkeypatch):\n    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)\n'),
        Invalid('from unittest import mock\nmock.patch("torch.cuda.is_available")\n', target="accelerator"),
        # The same function reached through the module under test (litgpt's tests).
        Invalid('from unittest import mock\nmock.patch("litgpt.utils.torch.cuda.device_count", return_value=0)\n'),
        # The module object and the attribute's name; the test's device values stay with the patch.
        Invalid(
            "import torch\n\ndef test_devices(monkeypatch):\n    monkeypatch.setattr(app.torch.cuda, 'device_count', lambda: 2)\n"
            "    assert app.devices() == [torch.device('cuda:0'), torch.device('cuda:1')]\n"
        ),
        Invalid(
            "import torch\nfrom unittest import mock\n\n@mock.patch.object(torch.cuda, 'is_available', return_value=True)\n"
            "def test_pick(_):\n    assert pick() == 'cuda'\n"
        ),
        # A CUDA device as the replacement: the test's expectations describe that machine.
        Invalid(
            "import torch\n\ndef test_rank(monkeypatch):\n    monkeypatch.setattr('app.utils.device_type', 'cuda')\n"
            "    assert app.utils.local_device() == torch.device('cuda:0')\n"
        ),
        Invalid("from unittest import mock\nwith mock.patch.object(settings, 'DEVICE', 'cuda:1'):\n    pass\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where no call's callee is a patcher (``_is_patcher``, or a
        ``_OBJECT_PATCHERS`` name) whose text could name CUDA, unsure elsewhere (libcst runs).
        Every report of the visitor sits in such a call and reads a string or a dotted name among
        its arguments that holds ``cud`` (``torch.cuda.``, ``torch.backends.cudnn.``, ``"cuda:0"``),
        written so or behind an escape. Most woken files spell no ``patch`` nor ``setattr`` at
        all, and a patcher's local name is bound by an import that writes ``patch`` (``from
        unittest.mock import patch as fake``), so those are decided without a walk."""
        if "patch" not in file.text and "setattr" not in file.text:
            return []
        return _Gate(cls, file).reports()

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "torch." not in node.value or not _is_cuda_path(string_value(node)):
            return
        anc = self.context.ancestors
        if len(anc) < 2 or not isinstance(anc[-1], cst.Arg) or not isinstance(anc[-2], cst.Call):
            return
        arg, call = anc[-1], anc[-2]
        if not call.args or call.args[0] is not arg or arg.keyword is not None:
            return
        if not self._is_patcher(call.func):
            return
        self._report_patch(node, str(string_value(node)), call)

    def visit_Call(self, node: cst.Call) -> None:
        # `mock.patch.object(torch.cuda, "is_available")`, `monkeypatch.setattr(app.torch.cuda,
        # "device_count", f)`: the module object, then the attribute's name.
        if len(node.args) < 2 or node.args[0].keyword is not None or node.args[1].keyword is not None:
            return
        self._cuda_replacement(node)
        target, attribute = node.args[0].value, string_value(node.args[1].value)
        dotted = dotted_name(target)
        if attribute is None or dotted is None or not _is_cuda_path(f"{dotted}.{attribute}"):
            return
        if self.qualname(node.func) in _OBJECT_PATCHERS or self._is_patcher(node.func):
            self._report_patch(node.args[0].value, f"{dotted}.{attribute}", node)

    def _cuda_replacement(self, call: cst.Call) -> None:
        """``monkeypatch.setattr("pkg.utils.device_type", "cuda")``, ``mock.patch("pkg.DEVICE",
        "cuda:0")``, ``mock.patch.object(utils, "device_type", "cuda")``: the patch makes the code
        under test see a CUDA device, and the test's expected devices describe it (torchtitan's
        ``get_local_device`` test expects ``torch.device("cuda:3")``). Reported with the test, so
        that no expectation moves to Neuron while the patch keeps CUDA."""
        # The cheap test first (every call with two arguments comes here): a "cuda" literal
        # second or third, or as `new=`; only then is the callee resolved.
        literals = [a for a in call.args[1:3] if isinstance(a.value, cst.SimpleString) and "cuda" in a.value.value]
        if not literals:
            return
        by_object = self.qualname(call.func) in _OBJECT_PATCHERS
        position = 2 if by_object else 1
        if not (by_object or self._is_patcher(call.func)):
            return
        new = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "new"), None)
        if new is None and len(call.args) > position and call.args[position].keyword is None:
            new = call.args[position].value
        device = string_value(new) if isinstance(new, cst.SimpleString) else None
        if device is None or _CUDA_DEVICE.fullmatch(device) is None:
            return
        if by_object:
            target = f"{dotted_name(call.args[0].value) or '?'}.{string_value(call.args[1].value) or '?'}"
        else:
            target = string_value(call.args[0].value) or self.context.code(call.args[0].value)
        self.report(
            new,
            f'patches `{target}` with "{device}": the test fakes a CUDA device',
            guidance=(
                "Left as is, with the test's own device values: they describe the machine the patch "
                "fakes. To test the port, patch it with the target device and move the expectations "
                "with it."
            ),
            effort=Effort.LOW,
            depends=self._faked_test(call),
        )

    def _report_patch(self, node: cst.CSTNode, target: str, call: cst.Call) -> None:
        self.report(
            node,
            f"patches `{target}`, which the ported code no longer calls",
            guidance=(
                "Patch the name the ported code calls instead (`torch.neuron.*` for the neuron "
                "target, `torch.accelerator.*` where the port uses it), or the project's own "
                "device helper; otherwise the test exercises the real device path."
            ),
            effort=Effort.LOW,
            depends=self._faked_test(call),
        )

    def _faked_test(self, call: cst.Call) -> tuple[cst.CSTNode, ...]:
        """The test a patch fakes a CUDA machine for: the function it decorates
        (``@mock.patch(...)``), else the function it runs in. () at module level."""
        anc = self.context.ancestors
        k = next((i for i in range(len(anc) - 1, -1, -1) if anc[i] is call), len(anc))
        for i in range(k - 1, -1, -1):
            if isinstance(anc[i], cst.Decorator) and i >= 1 and isinstance(anc[i - 1], cst.FunctionDef):
                return (anc[i - 1].body,)
            if isinstance(anc[i], cst.FunctionDef):
                return (anc[i].body,)
            if isinstance(anc[i], (cst.ClassDef, cst.Lambda)):
                return ()
        return ()

    def _is_patcher(self, func: cst.BaseExpression) -> bool:
        if self.qualname(func) in _PATCHERS:
            return True
        # pytest's monkeypatch fixture is a parameter: its type is not visible, its name is.
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "setattr"
            and isinstance(func.value, cst.Name)
            and func.value.value == "monkeypatch"
        )


class _Gate(AstDetector):
    """``CudaMockTarget.detect``'s walk: unsure at the first call a patcher makes whose text
    writes ``cud`` or an escape (``"torch.\\x63uda.is_available"`` is the visitor's too)."""

    def visit_Call(self, node: ast.Call) -> None:
        from cuda2neuron.python import Unsure

        start, end = self.file.bounds(node)
        text = self.file.text[start:end]
        if "cud" not in text and "\\" not in text:
            return
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "setattr" and isinstance(func.value, ast.Name) and func.value.id == "monkeypatch":
            raise Unsure("monkeypatch.setattr")
        qualified = self.ctx.qualname(func)
        if qualified in _PATCHERS or qualified in _OBJECT_PATCHERS:
            raise Unsure(f"a call of {qualified}")
