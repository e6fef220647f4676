"""CN111: integer GPU ordinals in Hugging Face / accelerate device maps, CUDA names in ``max_memory``."""

from __future__ import annotations

import ast
import re

import libcst as cst

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings
from cuda2neuron.python import Unsure

from .._shared.detector import AstDetector
from .._shared.device_maps import CUDA_KEY_RE, MAX_MEMORY_GUIDANCE
from .._shared.names import call_qualname
from .._shared.strings import string_value
from .._shared.target import device_expr
from ._helpers import ordinal_word

__all__ = ["DeviceMapGpuOrdinal"]

# accelerate's process indices: always ints, the ordinal of the process's device.
_INDEX_ATTRS = frozenset({"process_index", "local_process_index"})
# TRL's helper: {"": PartialState().local_process_index} where CUDA or XPU is found, else None
# (the model then loads on the CPU).
_KBIT_DEVICE_MAP = frozenset({"trl.get_kbit_device_map", "trl.trainer.get_kbit_device_map", "trl.trainer.utils.get_kbit_device_map"})


# What the rule can report on, in the code text (comments and docstrings blanked): a device map
# given an integer or a dict (``device_map = (0)``, ``device_map={...}``), a dict keyed by the
# empty string (``{"": rank}``, ``{'' : 0}``, ``{r"": i}``, the key parenthesized), TRL's helper,
# and every ``max_memory``. Most files that say ``device_map`` pass a string or a variable
# (``device_map="auto"``, ``device_map=device_map``): they are not parsed (diffusers: 35 files).
# What ``wakes`` looks for: a device map set to an integer or a dict, an empty key (``{"": 0}``,
# the whole model on one device), the kbit helper, a memory budget per device. The names are
# searched as plain bytes and the patterns one by one: as one alternation they started at every
# ``d``, ``m`` and ``g`` of the file (a third of the test's time went to the two names).
_WAKE_NAMES = (b"get_kbit_device_map", b"max_memory")
_WAKE = (re.compile(rb"device_map[\s\\]*=[\s\\(]*[\d{]"), re.compile(rb"""(?:""|'')[\s\\)]*:"""))


def _cuda_key(key: cst.BaseExpression | None) -> bool:
    value = string_value(key) if key is not None else None
    return value is not None and CUDA_KEY_RE.fullmatch(value) is not None


def _cuda_keys(node: cst.BaseExpression) -> bool:
    """A dict with a key that names a CUDA device (``"cuda:0"``). Integer keys (``{0: "20GiB"}``,
    ``{i: m for i in range(n)}``) are not: torch reads an integer device as the current
    accelerator's index, so on Trainium the plan places the model on neuron:0 (issue 39, measured)."""
    return isinstance(node, cst.Dict) and any(isinstance(e, cst.DictElement) and _cuda_key(e.key) for e in node.elements)


def _last_word(node: cst.BaseExpression) -> str:
    return node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else ""


class DeviceMapGpuOrdinal(Rule):
    """
    ## What it does
    Rewrites integer GPU ordinals of a Hugging Face / accelerate ``device_map`` to neuron
    devices: ``device_map=0`` and ``device_map={"": 0}`` become ``device_map="neuron:0"`` and
    ``{"": "neuron:0"}``; ``{"": local_rank}`` and ``{"": Accelerator().process_index}`` (the
    one-model-per-process idiom of QLoRA/DDP scripts) become ``{"": f"neuron:{...}"}``. A
    ``{"": <ordinal>}`` dict is recognised wherever it is written (qlora assigns it to a
    variable first). Reports ``max_memory`` dicts keyed by a CUDA device name
    (``{"cuda:0": "20GiB"}``) and TRL's ``get_kbit_device_map()``. Integer keys
    (``{0: "20GiB"}``) are left: torch reads an integer device as the current accelerator's index,
    so accelerate's plan places the model on neuron:0 (measured on the emulated device with
    accelerate 1.14.0 and transformers 5.25.0).

    ## Why is this bad?
    accelerate reads an integer in a device map as a CUDA (or XPU/NPU) device index; it knows
    no Neuron device. A ``max_memory`` key other than an integer, "cpu", "mps" or "disk" makes it
    raise. TRL's helper returns a device map only where CUDA or XPU is available, otherwise
    ``None`` (the CPU).

    ## Example
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map={"": local_rank})
    ```
    becomes
    ```python
    model = AutoModelForCausalLM.from_pretrained(name, device_map={"": f"neuron:{local_rank}"})
    ```

    ## Fix safety
    Safe for integer literals, ``int(...)`` calls, values assigned ``int(...)`` in the file and accelerate's
    ``process_index`` / ``local_process_index``; unsafe for names that only look like an index
    (``local_rank``, ``gpu_id``: one may already hold a device string). ``max_memory`` and
    ``get_kbit_device_map()`` are reported: which cores a model should use is the user's plan.
    With ``--target accelerator`` the ordinal becomes ``torch.device(<accelerator type>, i)``.
    """

    code = "CN111"
    name = "device-map-gpu-ordinal"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = ("device_map", "max_memory")
    emits = ("torch.device", "torch.accelerator.current_accelerator")
    VALID = (
        'from transformers import AutoModel\nm = AutoModel.from_pretrained("x", device_map="auto")\n',
        'm = AutoModel.from_pretrained("x", device_map={"": "neuron:0"})\n',
        'm = AutoModel.from_pretrained("x", max_memory={"cpu": "30GiB"})\n',
        # qlora: a per-process memory budget keyed by "" (a string), not a GPU index.
        "max_memory = {'': max_memory[local_rank]}\n",
        # integer keys are the current accelerator's indices: the model lands on neuron:0 (measured)
        'm = AutoModel.from_pretrained("x", device_map="auto", max_memory={0: "20GiB", "cpu": "30GiB"})\n',
        "max_memory = {i: '40000MB' for i in range(n_gpus)}\n",
        "max_memory = dict()\nmax_memory.update({i: f'{m}GIB' for i in range(n)})\nmax_memory[1] = '8GiB'\n",
        'lookup = {"": default}\n',
    )
    INVALID = (
        Invalid('m = AutoModel.from_pretrained("x", device_map=0)\n', 'm = AutoModel.from_pretrained("x", device_map="neuron:0")\n'),
        Invalid(
            'm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            'm = AutoModel.from_pretrained("x", device_map={"": "neuron:0"})\n',
        ),
        Invalid(
            "import os\nlocal_rank = int(os.environ.get('LOCAL_RANK', '0'))\ndevice_map = {'': local_rank}\n",
            "import os\nlocal_rank = int(os.environ.get('LOCAL_RANK', '0'))\ndevice_map = {'': f'neuron:{local_rank}'}\n",
        ),
        Invalid(
            'import os\ndevice_map = {"": int(os.environ.get("LOCAL_RANK") or 0)}\n',
            'import os\nimport torch\n\ndevice_map = {"": torch.device("neuron", int(os.environ.get("LOCAL_RANK") or 0))}\n',
        ),
        Invalid(
            'from accelerate import Accelerator\nm = load("x", device_map={"": Accelerator().process_index})\n',
            'from accelerate import Accelerator\nm = load("x", device_map={"": f"neuron:{Accelerator().process_index}"})\n',
        ),
        Invalid(
            'def load(rank):\n    return AutoModel.from_pretrained("x", device_map={"": rank})\n',
            'def load(rank):\n    return AutoModel.from_pretrained("x", device_map={"": f"neuron:{rank}"})\n',
            unsafe=True,
        ),
        Invalid('m = AutoModel.from_pretrained("x", device_map="auto", max_memory={"cuda:0": "20GiB", "cuda:1": "20GiB"})\n'),
        Invalid("max_memory = dict()\nmax_memory['cuda:1'] = '8GiB'\n"),
        Invalid("from trl import get_kbit_device_map\nkw = dict(device_map=get_kbit_device_map())\n"),
        Invalid(
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": 0})\n',
            'import torch\nm = AutoModel.from_pretrained("x", device_map={"": torch.device((torch.accelerator.current_accelerator() or torch.get_default_device()).type, 0)})\n',
            target="accelerator",
        ),
    )

    @classmethod
    def wakes(cls, code: bytes) -> bool:
        return any(name in code for name in _WAKE_NAMES) or any(p.search(code) is not None for p in _WAKE)

    def __init__(self, context) -> None:  # noqa: ANN001 - RuleContext
        super().__init__(context)
        # Names assigned int(...) or an integer literal in this file (flow-insensitive, like CN107).
        self._ints: set[str] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        value = node.value
        proven = isinstance(value, cst.Integer) or (
            isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "int"
        )
        for target in node.targets:
            # `max_memory["cuda:0"] = "20GiB"`
            sub = target.target
            if (
                isinstance(sub, cst.Subscript)
                and _last_word(sub.value).endswith("max_memory")
                and len(sub.slice) == 1
                and isinstance(sub.slice[0].slice, cst.Index)
                and _cuda_key(sub.slice[0].slice.value)
            ):
                self._report_max_memory(sub, (*self.context.ancestors, node, target))
            if isinstance(target.target, cst.Name):
                if proven:
                    self._ints.add(target.target.value)
                if target.target.value.endswith("max_memory") and _cuda_keys(value):
                    self._report_max_memory(value, (*self.context.ancestors, node))

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if qualified in _KBIT_DEVICE_MAP:
            self.report(node, _KBIT_MESSAGE, guidance=_KBIT_GUIDANCE, effort=Effort.LOW)
            return
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "update"
            and _last_word(func.value).endswith("max_memory")
            and node.args
            and _cuda_keys(node.args[0].value)
        ):
            # `max_memory.update({"cuda:0": m})`
            self._report_max_memory(node.args[0].value, (*self.context.ancestors, node, node.args[0]))
        for arg in node.args:
            if arg.keyword is None:
                continue
            above = (*self.context.ancestors, node, arg)
            if arg.keyword.value == "device_map" and isinstance(arg.value, cst.Integer):
                self._rewrite(arg.value, above)
            elif arg.keyword.value == "max_memory" and _cuda_keys(arg.value):
                self._report_max_memory(arg.value, above)

    def visit_Dict(self, node: cst.Dict) -> None:
        # `{"": 0}` wherever it is written, and every value of the dict passed as device_map=.
        parent = self.context.parent
        is_map = isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "device_map"
        for element in node.elements:
            if not isinstance(element, cst.DictElement):
                continue
            if is_map or string_value(element.key) == "":
                self._rewrite(element.value, (*self.context.ancestors, node, element))

    def _rewrite(self, value: cst.BaseExpression, above: tuple[cst.CSTNode, ...]) -> None:
        if isinstance(value, cst.Integer):
            safety = Safety.SAFE
        elif isinstance(value, cst.Name) and value.value in self._ints:
            safety = Safety.SAFE
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "int":
            # alpaca-lora: {"": int(os.environ.get("LOCAL_RANK") or 0)} - an int in a device map is an index
            safety = Safety.SAFE
        elif isinstance(value, cst.Attribute) and value.attr.value in _INDEX_ATTRS:
            safety = Safety.SAFE
        elif isinstance(value, (cst.Name, cst.Attribute)) and ordinal_word(_last_word(value)):
            safety = Safety.UNSAFE
        else:
            return
        code = self.context.code(value)
        message = f"`{code}` in a device map is a CUDA device index"
        built = device_expr(self, value, quote_like=self._quote_like(above))
        if built is None:
            self.report(value, message, guidance=f'write the neuron device: f"neuron:{{{code}}}"', ancestors=above)
            return
        expr, imports = built
        self.report(
            value,
            message,
            replacement=expr,
            safety=safety,
            imports=imports,
            guidance="" if safety is Safety.SAFE else "leave it if it already holds a device",
            effort=Effort.NONE if safety is Safety.SAFE else Effort.LOW,
            description="name the neuron device",
            ancestors=above,
        )

    @staticmethod
    def _quote_like(above: tuple[cst.CSTNode, ...]) -> cst.BaseExpression | None:
        """The dict key's string, so the new value takes its quotes (``{'': 'neuron:0'}``)."""
        element = above[-1] if above else None
        return element.key if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) else None

    def _report_max_memory(self, node: cst.BaseExpression, above: tuple[cst.CSTNode, ...]) -> None:
        self.report(node, _MAX_MEMORY_MESSAGE, guidance=MAX_MEMORY_GUIDANCE, effort=Effort.MEDIUM, ancestors=above)

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        return _Detector(cls, file).findings()


_MAX_MEMORY_MESSAGE = "`max_memory` keyed by a CUDA device name: accelerate reads only integer indices, \"cpu\", \"mps\" and \"disk\""
_KBIT_MESSAGE = (
    "`get_kbit_device_map()` gives a device map only where CUDA or XPU is available; on Trainium "
    "it returns None and the model loads on the CPU"
)
_KBIT_GUIDANCE = 'pass device_map={"": f"neuron:{PartialState().local_process_index}"} instead'


def _ast_int(node: ast.expr | None) -> bool:
    """libcst's ``Integer``: an int literal (``True`` is a ``Name`` there, a bool here)."""
    return isinstance(node, ast.Constant) and type(node.value) is int


def _ast_str(node: ast.expr | None) -> str | None:
    """``string_value`` on ``ast``: a str literal, implicit concatenations included (f-strings
    and bytes are no ``Constant`` str)."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _ast_last_word(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _ast_cuda_keys(node: ast.expr) -> bool:
    """``_cuda_keys`` on ``ast`` (a ``**spread`` has no key)."""
    return isinstance(node, ast.Dict) and any(
        key is not None and CUDA_KEY_RE.fullmatch(_ast_str(key) or "x") is not None for key in node.keys
    )


class _Detector(AstDetector):
    """The visitor above on CPython's ``ast`` (``python/_ast_walk.py``), for files the engine
    does not parse with libcst: the ``max_memory`` and ``get_kbit_device_map()`` reports. An
    ordinal it would rewrite is unsure (its fix text is libcst's to build, and a safe one is an
    edit: libcst runs there anyway)."""

    def findings(self) -> list[Finding] | None:
        self._ints: set[str] = set()
        reports = self.reports()
        if reports is None:
            return None
        return [self.finding(node, message, guidance, effort) for node, message, guidance, effort, _ in reports]

    def _report(self, node: ast.AST, message: str, guidance: str, effort: Effort) -> None:
        self._reports.append((node, message, guidance, effort, tuple(self.ctx.ancestors)))

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        proven = _ast_int(value) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "int")
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _ast_last_word(target.value).endswith("max_memory"):
                if isinstance(target.slice, ast.Tuple) and len(target.slice.elts) == 1:
                    # `max_memory["cuda:0",]` is one libcst subscript element (reported), `max_memory[("cuda:0",)]`
                    # a tuple (not): ast writes both as a tuple.
                    raise Unsure("a one-element tuple as a max_memory subscript")
            if (
                isinstance(target, ast.Subscript)
                and _ast_last_word(target.value).endswith("max_memory")
                and CUDA_KEY_RE.fullmatch(_ast_str(target.slice) or "x") is not None
            ):
                self._report(target, _MAX_MEMORY_MESSAGE, MAX_MEMORY_GUIDANCE, Effort.MEDIUM)
            if isinstance(target, ast.Name):
                if proven:
                    self._ints.add(target.id)
                if target.id.endswith("max_memory") and _ast_cuda_keys(value):
                    self._report(value, _MAX_MEMORY_MESSAGE, MAX_MEMORY_GUIDANCE, Effort.MEDIUM)

    def visit_Call(self, node: ast.Call) -> None:
        if self.ctx.call_qualname(node) in _KBIT_DEVICE_MAP:
            self._report(node, _KBIT_MESSAGE, _KBIT_GUIDANCE, Effort.LOW)
            return
        func = node.func
        args = self.ctx.args(node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "update"
            and _ast_last_word(func.value).endswith("max_memory")
            and args
            and _ast_cuda_keys(args[0].value)
        ):
            self._report(args[0].value, _MAX_MEMORY_MESSAGE, MAX_MEMORY_GUIDANCE, Effort.MEDIUM)
        for arg in args:
            if arg.keyword == "device_map" and _ast_int(arg.value):
                self._rewrite(arg.value)
            elif arg.keyword == "max_memory" and _ast_cuda_keys(arg.value):
                self._report(arg.value, _MAX_MEMORY_MESSAGE, MAX_MEMORY_GUIDANCE, Effort.MEDIUM)

    def visit_Dict(self, node: ast.Dict) -> None:
        parent = self.ctx.parent
        is_map = getattr(parent, "keyword", None) == "device_map"  # an ArgNode: the value of device_map=
        if isinstance(parent, ast.ClassDef) and any(k.arg == "device_map" and k.value is node for k in parent.keywords):
            # `class A(device_map={...})`: libcst's class keyword is an Arg, ast's no ArgNode.
            raise Unsure("a dict given to a class keyword device_map=")
        for key, value in zip(node.keys, node.values):
            if key is not None and (is_map or _ast_str(key) == ""):
                self._rewrite(value)

    def _rewrite(self, value: ast.expr) -> None:
        """``_rewrite``: where the visitor reports an ordinal (with a fix, or with the fix's
        words when no expression can be built) the detector is unsure."""
        if (
            _ast_int(value)
            or (isinstance(value, ast.Name) and value.id in self._ints)
            or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "int")
            or (isinstance(value, ast.Attribute) and value.attr in _INDEX_ATTRS)
            or (isinstance(value, (ast.Name, ast.Attribute)) and ordinal_word(_ast_last_word(value)))
        ):
            raise Unsure("an ordinal in a device map: the visitor builds its fix")
