"""CN303: autocast / GradScaler whose device type is a variable in a file that still says "cuda"."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Settings, Valid

from cuda2neuron.python import visit_syntax

from .._shared.args import arg_by_name
from .._shared.strings import string_value
from ._detect_ast import amp_uses, variable_findings
from ._helpers import AUTOCAST, SCALER, wakes_on_cuda

__all__ = ["AmpDeviceVariable"]

# (qualified names, device parameter name) per API; the device is the first parameter of both.
_APIS = ((AUTOCAST, "device_type"), (SCALER, "device"))
_MEMBERS = frozenset({"autocast", "GradScaler"})


def _is_variable(expr: cst.BaseExpression) -> bool:
    """A plain name or attribute chain (``device_type``, ``self.cfg.device``).

    ``x.device.type`` is the robust, data-driven form and is not reported; expressions through
    calls (``torch.accelerator.current_accelerator().type``) are already portable.
    """
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "type":
            return False
        node: cst.BaseExpression = expr
        while isinstance(node, cst.Attribute):
            node = node.value
        return isinstance(node, cst.Name)
    return False


class _CudaDeviceLiteral(cst.CSTVisitor):
    """A ``"cuda"`` / ``"cuda:N"`` / ``f"cuda:{i}"`` literal in code: the value a device-type
    variable may still be computed from. Not a comment, not a docstring, not a string that only
    starts with the word (``"cuda_graphs"``, ``"torch.backends.cuda..."``): a file the port left
    with such text alone reported every autocast line, the ones migrate itself rewrote too."""

    def __init__(self) -> None:
        self.found = False

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:
        # A statement that is only a string is a docstring or prose.
        return not (len(node.body) == 1 and isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)))

    def visit_Arg(self, node: cst.Arg) -> bool:
        # `map_location={"cuda:0": device, "neuron:0": device}`: a key names where a checkpoint
        # was saved (the port keeps the CUDA key on purpose), never a device the code picks.
        if node.keyword is not None and node.keyword.value == "map_location" and isinstance(node.value, cst.Dict):
            for element in node.value.elements:
                if isinstance(element, cst.DictElement):
                    visit_syntax(element.value, self)
            return False
        return True

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        value = string_value(node)
        if value is not None and (value == "cuda" or value.startswith("cuda:")):
            self.found = True

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and (first.value == "cuda" or first.value.startswith("cuda:")):
            self.found = True


class AmpDeviceVariable(Rule):
    """
    ## What it does
    Reports autocast and GradScaler device types held in variables while the file still says "cuda".
    That is ``torch.autocast(device_type=<variable>)`` and ``torch.amp.GradScaler(<variable>)``
    in a file whose code still holds a CUDA device literal (``"cuda"``, ``"cuda:0"``,
    ``f"cuda:{rank}"``; comments, docstrings and strings that only start with the word, such as
    ``"cuda_graphs"``, do not count).

    ## Why is this bad?
    The device type is often derived from a string: training scripts compute
    ``device_type = "cuda" if "cuda" in device else "cpu"`` and pass the variable to autocast.
    Nothing at the autocast call says "cuda", yet on Trainium the region runs in fp32 (or on the
    wrong device) unless the string the variable comes from was ported too. The device rules
    (CN1xx) rewrite the literal where they can; this finding points at the call that depends on
    it, so a literal they could not prove to be a device is not missed.

    ## Example
    ```python
    device_type = "cuda" if "cuda" in device else "cpu"
    ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    ```
    The autocast line is reported until no ``"cuda"`` literal is left in the file.

    ## Fix safety
    Display only: the value is computed elsewhere; once the file holds no ``"cuda"`` literal the
    finding disappears (ported code checks clean).
    """

    code = "CN303"
    name = "amp-device-variable"
    advisory = True  # a hint about a variable: the autocast call runs on the target: never holds back a group of linked fixes
    triggers = ("autocast", "GradScaler")
    wakes = classmethod(wakes_on_cuda)
    VALID = (
        # Nothing left that says cuda: the variable holds the ported value.
        "import torch\ndevice_type = 'neuron' if 'neuron' in device else 'cpu'\n"
        "ctx = torch.autocast(device_type=device_type)\n",
        # Data-driven, robust form.
        "import torch\ndevice = 'cuda'\nctx = torch.autocast(x.device.type)\n",
        # Already portable (the variable is not a "cuda" literal): left alone.
        "import torch\nlog('cuda')\nctx = torch.autocast(torch.accelerator.current_accelerator().type)\n",
        Valid("import torch\nd = 'cuda'\nctx = torch.autocast('cpu')\n"),
        # The word only in a comment, a docstring or a longer name: nothing is left to port.
        "import torch\n\ndef f():\n    \"\"\"Runs on 'cuda:0' or CPU.\"\"\"\n    # device: 'cuda', 'cuda:1'\n"
        "    mode = 'cuda_graphs'\n    return torch.autocast(device_type=device_type)\n",
        # A checkpoint's CUDA key, kept beside its Neuron twin, is not a device the code picks.
        "import torch\nck = torch.load(p, map_location={'cuda:0': dev, 'neuron:0': dev})\n"
        "ctx = torch.autocast(device_type=device_type)\n",
    )
    INVALID = (
        Invalid(
            "import torch\ndevice_type = 'cuda' if 'cuda' in device else 'cpu'\n"
            "ctx = torch.amp.autocast(device_type=device_type, dtype=ptdtype)\n"
        ),
        Invalid("import torch\nDEVICE = 'cuda'\nscaler = torch.amp.GradScaler(DEVICE)\n"),
        Invalid("import torch\n\n@torch.autocast(self_cfg.device, enabled=False)\ndef f():\n    return 'cuda:0'\n"),
        Invalid("import torch\nx = f'cuda:{rank}'\nctx = torch.autocast(device_type=kind)\n"),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visitor's findings from the walk CN301 and CN302 share (``_detect_ast``); unsure
        where ``ast`` cannot tell whether a CUDA literal is left or how libcst writes the argument."""
        uses = amp_uses(file)
        return None if uses is None else variable_findings(cls, file, uses)

    def _mentions_cuda(self) -> bool:
        """Whether the module still holds a CUDA device literal (looked for once per file)."""
        found = getattr(self, "_found", None)
        if found is None:
            finder = _CudaDeviceLiteral()
            visit_syntax(self.context.module, finder)
            found = self._found = finder.found
        return found

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        member = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        if member not in _MEMBERS:
            return
        for names, param in _APIS:
            device = arg_by_name(node, param, position=0)
            if device is None or not _is_variable(device.value):
                continue
            if self.qualname(func) not in names or not self._mentions_cuda():
                continue
            variable = self.context.code(device.value)
            self.report(
                device,
                f"device type taken from `{variable}` in a file that still says \"cuda\"",
                guidance=f"Make sure `{variable}` holds \"neuron\" on Trainium: port the string it is "
                f"computed from (e.g. `device_type = \"neuron\" if \"neuron\" in device else \"cpu\"`), "
                "or derive it from a tensor with `x.device.type`.",
                effort=Effort.LOW,
            )
            return
