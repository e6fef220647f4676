"""CN105: the ``torch.cuda.device(i)`` context manager."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings

from .._shared.args import arg_by_name
from .._shared.detector import AstDetector, may_be_linked
from .._shared.target import NEURON, checked_for_accelerator

__all__ = ["CudaDeviceContext"]


class CudaDeviceContext(Rule):
    """
    ## What it does
    Rewrites the ``torch.cuda.device(i)`` context manager to ``torch.neuron.device(i)``. With ``--target accelerator`` it becomes
    ``torch.accelerator.device_index(i if torch.accelerator.is_available() else None)`` when the
    oldest supported torch is 2.8 or newer (``device_index(i)`` raises on a machine without an
    accelerator; ``device_index(None)`` does nothing there).

    ## Why is this bad?
    ``torch.cuda.device`` initialises CUDA; on Trainium the device module is ``torch.neuron``,
    whose ``device`` context manager takes the same index (or a ``"neuron:N"`` device).

    ## Example
    ```python
    with torch.cuda.device(rank):
        buf = torch.empty(n, device="cuda")
    ```
    becomes
    ```python
    with torch.neuron.device(rank):
        buf = torch.empty(n, device="neuron")
    ```
    (the ``device=`` string is CN102's.)

    ## Fix safety
    Safe for ``--target neuron``: same name, same arguments. For ``--target accelerator``,
    ``torch.accelerator.device_index`` accepts only an index (not a device or a string) and
    exists from torch 2.8: the fix is safe for an integer literal, unsafe for any other
    argument (it may be a ``torch.device``), and a report for older torch.
    """

    code = "CN105"
    name = "cuda-device-context"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = ("cuda",)
    emits = ("torch.neuron.device", "torch.accelerator.device_index")
    VALID = (
        "import torch\nwith torch.neuron.device(1):\n    pass\n",
        "with device(1):\n    pass\n",  # a local helper, not torch.cuda.device
        "import torch\nwith torch.accelerator.device_index(0):\n    pass\n",
        "import torch\nd = torch.device('cpu')\n",
    )
    INVALID = (
        Invalid(
            "import torch\nwith torch.cuda.device(rank):\n    pass\n",
            "import torch\nwith torch.neuron.device(rank):\n    pass\n",
        ),
        Invalid(
            "import torch as th\nwith th.cuda.device(0):\n    pass\n",
            "import torch as th\nwith th.neuron.device(0):\n    pass\n",
        ),
        # The from-import left unused is removed (`torch.neuron.device` is no use of it).
        Invalid(
            "from torch.cuda import device\nwith device(1):\n    pass\n",
            "import torch\n\nwith torch.neuron.device(1):\n    pass\n",
        ),
        Invalid(
            "import torch\nwith torch.cuda.device(1):\n    pass\n",
            "import torch\nwith torch.accelerator.device_index(1 if torch.accelerator.is_available() else None):\n    pass\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nwith torch.cuda.device(d):\n    pass\n",
            "import torch\nwith torch.accelerator.device_index(d if torch.accelerator.is_available() else None):\n    pass\n",
            target="accelerator",
            unsafe=True,
        ),
        # Already behind an availability check: no second one.
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    with torch.cuda.device(1):\n        pass\n",
            "import torch\nif torch.cuda.is_available():\n    with torch.accelerator.device_index(1):\n        pass\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nwith torch.cuda.device(1):\n    pass\n",
            None,
            target="accelerator",
            options=(("min_torch", (2, 7)),),
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings(settings)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        # Cheap test first; a bare name may be an alias (from torch.cuda import device as cd).
        if isinstance(func, cst.Attribute):
            if func.attr.value != "device":
                return
        elif not isinstance(func, cst.Name):
            return
        if self.qualname(func) != "torch.cuda.device":
            return
        message = "`torch.cuda.device(...)` selects a CUDA device"
        unused = (("torch.cuda", "device"),) if isinstance(func, cst.Name) else ()
        settings = self.context.settings
        if settings.target == NEURON:
            target, safety = "torch.neuron.device", Safety.SAFE
        else:
            arg = arg_by_name(node, "device", position=0)
            if settings.min_torch < (2, 8) or arg is None or arg.keyword is not None:
                self.report(
                    node,
                    message,
                    guidance="torch.accelerator.device_index needs torch >= 2.8; before that, "
                    "call torch.accelerator.set_device_index(i) and restore the old index afterwards",
                )
                return
            target = "torch.accelerator.device_index"
            safety = Safety.SAFE if isinstance(arg.value, cst.Integer) else Safety.UNSAFE
        spelled = self.spell(target)
        if spelled is None:
            self.report(node, message, guidance=f"use `{target}(...)`")
            return
        new_func, imports = spelled
        replacement = node.with_changes(func=new_func)
        if settings.target != NEURON and not checked_for_accelerator(self, node):
            # device_index(i) raises where there is no accelerator; device_index(None) does nothing.
            check = self.spell("torch.accelerator.is_available")
            if check is not None:
                index = cst.IfExp(test=cst.Call(func=check[0]), body=arg.value, orelse=cst.Name("None"))
                replacement = replacement.with_changes(
                    args=[a.with_changes(value=index) if a is arg else a for a in node.args]
                )
        self.report(
            node,
            message,
            replacement=replacement,
            safety=safety,
            imports=imports,
            unused_imports=unused,
            guidance="" if safety is Safety.SAFE else "the argument must be an index, not a device",
            description=f"use `{target}`",
        )


_MESSAGE = "`torch.cuda.device(...)` selects a CUDA device"
_TARGET = "torch.neuron.device"


class _Detector(AstDetector):
    """``visit_Call`` above on CPython's ``ast``, for the neuron target: ``torch.cuda.device(i)``
    spelled through an alias of ``torch`` (or of ``torch.cuda``) becomes ``<alias>.neuron.device(i)``
    (safe), or is reported without a fix where ``torch`` is shadowed. Unsure where the fix adds
    an import or removes one (a bare ``device`` from ``torch.cuda``), where the callee is
    parenthesized (libcst's new callee has no parentheses), where the program pass may link the
    report, and on the accelerator target."""

    def findings(self, settings: Settings) -> list[Finding] | None:
        self._neuron = settings.target == "neuron"
        return self.made_findings()

    def _finding(self, node: ast.Call, spelled: str | None, ancestors: tuple[object, ...]) -> Finding:
        if spelled is None:
            return self.finding(node, _MESSAGE, f"use `{_TARGET}(...)`", Effort.LOW)
        start, end = self.file.bounds(node.func)
        fix = self.edit(node, ancestors, start, end - start, spelled, Safety.SAFE, f"use `{_TARGET}`")
        return self.finding(node, _MESSAGE, "", Effort.NONE, fix)

    def visit_Call(self, node: ast.Call) -> None:
        from cuda2neuron.python import Unsure, written_bounds

        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr != "device":
                return
        elif not isinstance(func, ast.Name):
            return
        if self.ctx.qualname(func) != "torch.cuda.device":
            return
        if not self._neuron:
            raise Unsure("the accelerator target")
        if isinstance(func, ast.Name):
            raise Unsure("the from-import the fix leaves unused is removed by libcst")
        ancestors = tuple(self.ctx.ancestors)
        if may_be_linked(self.file, node, ancestors):
            raise Unsure("a report the program pass may link")
        if written_bounds(self.file, func, (*ancestors, node)) != self.file.bounds(func):
            raise Unsure("a parenthesized callee")
        self._reports.append((node, self._spell(), ancestors))

    def _spell(self) -> str | None:
        """``RuleContext.spell(_TARGET)`` on the walk's scope: the user's alias, or None where
        ``torch`` is shadowed here; Unsure where the fix would need an import."""
        from cuda2neuron.python import Unsure

        parts = _TARGET.split(".")
        scope = self.ctx.scope
        for cut in range(len(parts), 0, -1):
            local = scope.local_name_for(".".join(parts[:cut]))
            if local is not None:
                return ".".join([local, *parts[cut:]])
        if scope.lookup(parts[0]) is None and scope.bound_anywhere(parts[0]):
            return None
        raise Unsure("the fix adds an import")
