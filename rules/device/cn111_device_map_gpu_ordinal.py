"""CN111: integer GPU ordinals in Hugging Face / accelerate loading (``device_map``, ``max_memory``)."""

from __future__ import annotations

import re

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule, Safety

from .._shared.device_maps import GPU_KEY_RE, MAX_MEMORY_GUIDANCE
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


def _gpu_key(key: cst.BaseExpression | None) -> bool:
    if isinstance(key, cst.Integer):
        return True
    value = string_value(key) if key is not None else None
    return value is not None and GPU_KEY_RE.fullmatch(value) is not None


def _int_keys(node: cst.BaseExpression) -> bool:
    """A dict keyed by GPU indices (integer literals, ``"cuda:0"``, ``"0"``), or a comprehension keyed
    by ``range(...)`` values."""
    if isinstance(node, cst.Dict):
        return any(isinstance(e, cst.DictElement) and _gpu_key(e.key) for e in node.elements)
    if isinstance(node, cst.DictComp):
        key, comp = node.key, node.for_in
        return (
            isinstance(key, cst.Name)
            and isinstance(comp.target, cst.Name)
            and comp.target.value == key.value
            and isinstance(comp.iter, cst.Call)
            and isinstance(comp.iter.func, cst.Name)
            and comp.iter.func.value == "range"
        )
    return False


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
    variable first). Reports ``max_memory`` dicts keyed by GPU index (``{0: "20GiB"}``,
    ``{"cuda:0": "20GiB"}``, ``{i: m for i in range(n_gpus)}``) and TRL's ``get_kbit_device_map()``.

    ## Why is this bad?
    accelerate reads an integer in a device map as a CUDA (or XPU/NPU) device index; it knows
    no Neuron device, and its memory planning only counts the GPUs it finds: ``max_memory`` keys
    it cannot find are dropped and the model lands on the CPU. TRL's helper returns a device map
    only where CUDA or XPU is available, otherwise ``None`` (the CPU).

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
        Invalid('m = AutoModel.from_pretrained("x", device_map="auto", max_memory={0: "20GiB", "cpu": "30GiB"})\n'),
        Invalid("max_memory = {i: '40000MB' for i in range(n_gpus)}\n"),
        Invalid('m = AutoModel.from_pretrained("x", device_map="auto", max_memory={"cuda:0": "20GiB", "cuda:1": "20GiB"})\n'),
        Invalid("max_memory = {'0': '20GiB', 'cpu': '60GiB'}\n"),
        Invalid("max_memory = dict()\nmax_memory.update({i: f'{m}GIB' for i in range(n)})\nmax_memory[1] = '8GiB'\n"),
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
            # `max_memory[0] = "20GiB"`
            sub = target.target
            if (
                isinstance(sub, cst.Subscript)
                and _last_word(sub.value).endswith("max_memory")
                and len(sub.slice) == 1
                and isinstance(sub.slice[0].slice, cst.Index)
                and isinstance(sub.slice[0].slice.value, cst.Integer)
            ):
                self._report_max_memory(sub, (*self.context.ancestors, node, target))
            if isinstance(target.target, cst.Name):
                if proven:
                    self._ints.add(target.target.value)
                if target.target.value.endswith("max_memory") and _int_keys(value):
                    self._report_max_memory(value, (*self.context.ancestors, node))

    def visit_Call(self, node: cst.Call) -> None:
        qualified = call_qualname(self, node)
        if qualified in _KBIT_DEVICE_MAP:
            self.report(
                node,
                "`get_kbit_device_map()` gives a device map only where CUDA or XPU is available; on Trainium "
                "it returns None and the model loads on the CPU",
                guidance='pass device_map={"": f"neuron:{PartialState().local_process_index}"} instead',
                effort=Effort.LOW,
            )
            return
        func = node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "update"
            and _last_word(func.value).endswith("max_memory")
            and node.args
            and _int_keys(node.args[0].value)
        ):
            # AutoGPTQ's examples: `max_memory.update({i: m for i in range(torch.cuda.device_count())})`
            self._report_max_memory(node.args[0].value, (*self.context.ancestors, node, node.args[0]))
        for arg in node.args:
            if arg.keyword is None:
                continue
            above = (*self.context.ancestors, node, arg)
            if arg.keyword.value == "device_map" and isinstance(arg.value, cst.Integer):
                self._rewrite(arg.value, above)
            elif arg.keyword.value == "max_memory" and _int_keys(arg.value):
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
        self.report(
            node,
            "`max_memory` keyed by GPU index: accelerate plans memory for CUDA devices only",
            guidance=MAX_MEMORY_GUIDANCE,
            effort=Effort.MEDIUM,
            ancestors=above,
        )
