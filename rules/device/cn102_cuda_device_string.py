"""CN102: "cuda" device strings in device positions."""

from __future__ import annotations

import ast

import libcst as cst

from cuda2neuron.core import Effort, Finding, Fix, Invalid, Rule, Safety, Settings
from cuda2neuron.python import ArgNode

from .._shared.consumers import kernel_test, library_callee, library_callee_by_name, pointer_buffer, takes_torch_device
from .._shared.detector import AstDetector
from .._shared.device_readers import device_reader
from .._shared.kernel_gates import handed_to_kernel
from .._shared.label_readers import label_handed
from .._shared.option_readers import option_reader
from .._shared.returned_values import returned_option
from .._shared.round_trip import module_params, module_qualifier, round_trip_texts
from .._shared.strings import string_value
from .._shared.target import NEURON, checkpoint_device, needs_newer_torch
from . import _strings_ast
from ._helpers import (
    _DEVICE_RE, _PREFIX, UseKind, _quote_of, find_use, is_bare_prefix, is_cuda_device_string, is_test_data, looks_like_cuda_fstring,
    retarget_fstring, retarget_string,
)
from ._records import recorded_only

__all__ = ["CudaDeviceString"]


def _bare_device(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.SimpleString) and string_value(node) == "cuda"

def _joined_prefix(node: cst.SimpleString, parent: cst.CSTNode | None) -> bool:
    """``"cuda:" + str(rank)``: the bare prefix starts a device string built at run time."""
    return isinstance(parent, cst.BinaryOperation) and parent.left is node and isinstance(parent.operator, cst.Add)


_GUIDANCE = 'write the target device instead ("neuron", "neuron:N", or torch.accelerator.current_accelerator())'


def _library_message(code: str, callee: str) -> tuple[str, str]:
    """The message and guidance of a device handed to a library that reads it itself."""
    return (
        f"`{code}` is handed to `{callee}`, which reads the device itself",
        f"Left as is: `{callee.split('.')[0]}` is not torch, and not a library known to hand its "
        'device to torch, where "neuron" works; libraries that parse it themselves '
        "(safetensors, ONNX Runtime, ultralytics) reject it. Check what the callee does with "
        'it: if it passes it on to torch, write "neuron"; if it runs CUDA code of its own, '
        "keep this path off Trainium.",
    )


class CudaDeviceString(Rule):
    """
    ## What it does
    Rewrites CUDA device strings where they name a device. The shapes are ``"cuda"``,
    ``"cuda:N"``, ``f"cuda:{rank}"``, f-strings without a placeholder (``f"cuda"``), ``"cuda:%d" % i``, ``"cuda:{}".format(i)`` and ``"cuda:" + str(i)``; the
    positions are ``torch.device(...)``, ``.to(...)``,
    ``device=``, ``map_location=`` and ``device_map=`` (a whole model on one device) arguments
    of any call, ``torch.load(f, "cuda")``,
    ``torch.Generator``, parameter defaults and assignments whose name says device
    (``device``, ``self.device``, ``args.device``, ``cfg["device"]``, ``device_type``), what a
    function named for a device returns (``def get_device(): return "cuda"``), elements
    added to a device collection (``devices.append("cuda:1")``), the devices a loop runs over
    (``for device in ["cpu"] + ["cuda"]``), the values ``pytest.mark.parametrize`` gives an
    argument named like a device (``parametrize("dtype,device", [(torch.half, "cuda")])``,
    ``pytest.param("cuda", marks=...)``), argparse
    ``add_argument("--device", default="cuda", choices=["cuda", "cpu"])``, config dicts
    ``{"device": "cuda"}`` and the fallback of a lookup whose key says device
    (``getattr(args, "device", "cuda")``, ``os.environ.get("TORCH_DEVICE", "cuda")``,
    ``cfg.get("device", "cuda")``), and the value a conditional picks when
    ``torch.cuda.is_available()`` passes (``devices += ["cuda"] if torch.cuda.is_available()
    else []``). The
    string is followed through ``"cuda" if ... else "cpu"``, ``args.device or "cuda"`` and
    tuples/lists, and through a plain name (``arg = "cuda:0"`` ... ``torch.device(arg)`` in
    the same scope). In a ``map_location`` dict the values change, and each CUDA key gains a
    target twin (``{"cuda:0": "neuron:1", "neuron:0": "neuron:1"}``): a key says where a
    checkpoint was *saved*, and a port loads both checkpoints saved on CUDA and its own.

    ## Why is this bad?
    A ``"cuda"`` device fails on a machine without CUDA. TorchNeuron names its device
    ``"neuron"``, with ``"neuron:N"`` for the N-th NeuronCore of the process.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(3, device=f"cuda:{rank}")
    state = torch.load(path, map_location="cuda:%d" % rank)
    ```
    becomes
    ```python
    device = "neuron" if torch.cuda.is_available() else "cpu"
    x = torch.zeros(3, device=f"neuron:{rank}")
    state = torch.load(path, map_location="neuron:%d" % rank)
    ```
    (``torch.cuda.is_available`` is moved by the torch.cuda rules, CN2xx.)

    ## Fix safety
    Safe: only strings in device positions change, and they keep their shape (an f-string stays
    an f-string, a ``%`` template stays a template). A "cuda" string that is a word — an
    implementation selector (``impl="cuda"``), a ``--cuda`` flag, ``backend="cuda"`` of a
    non-torch call, log text — is not a device position and is never touched. Autocast and
    GradScaler device types belong to the AMP rules (CN3xx); comparisons to CN103. A device
    handed to CUDA-only code (``isaacgymenvs.make(sim_device="cuda:0")``, the argument of a
    CUDA-only package's call or of torch's CUDA-only calls), a tensor whose raw pointer is taken
    (``out.data_ptr()`` in a TensorRT binding) and the tensors of a test that runs a CUDA kernel
    are reported and kept: that code cannot take a neuron device, and the port replaces it, and
    its device, by hand. So is a device handed to a library outside torch that is not known to
    pass it on to torch (``safetensors.torch.load_file(p, device="cuda")``: the library parses it
    itself); transformers, diffusers, accelerate, timm and the other libraries in
    ``rules/_shared/consumers.py`` get "neuron". A device string stored in a field of the file's
    own record class that the file only writes out (``meta.rand_device = "cuda"``, read only in
    an f-string or a dict) records which device made something: it is left as it is. So is a
    device a test writes into a parser or constructor and asserts back
    (``Namespace(device="cuda:1")`` ... ``assert cfg.device == "cuda:1"``; ``rules/_shared/round_trip.py``
    decides, for CN103, CN109 and the residual pass too): the test's data, unless the test
    also hands it, or what it parsed, to torch.
    On the accelerator target a ``map_location`` device with an index maps to ``"cpu"`` where no
    accelerator exists (torch.load refuses "cpu:0").
    A device handed to another module's code that reads it with a test a safe run leaves on
    "cuda", in a chain of tests whose ``else`` raises (``PolicyConfig(device="cuda")`` whose
    ``__post_init__`` asks ``is_device_available(self.device)``: ``if name.startswith("cuda"):
    return torch.cuda.is_available() ... else: raise ValueError``), or a parameter default that
    reaches one, is not moved alone: "neuron" would reach the raise. Unsafe where that test's
    own fix is (its branches call torch only), so ``--unsafe-fixes`` moves both; otherwise
    reported and kept, the message naming the test (``file:line``). The same holds for a
    parameter handed on through up to four calls before the test, and for a command-line
    option's default and choices (``add_argument("--device", default="cuda", choices=["cuda",
    "cpu"])``) whose value another module's such test reads as ``args.device``. The project
    sweep knows the readers (``ProjectFacts.device_readers``, ``ProjectFacts.option_readers``).
    """

    code = "CN102"
    name = "cuda-device-string"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE})
    triggers = ("cuda",)
    emits = ("torch.accelerator.current_accelerator",)
    VALID = (
        'impl = "cuda"\nassert impl in ["ref", "cuda"]\n',
        'run(backend="cuda")\n',
        'parser.add_argument("--cuda", action="store_true", help="use cuda")\n',
        'USE_CUDA = "cuda"\n',
        'print("moving model to cuda")\nlogger.info(f"cuda:{rank} ready")\n',
        'print(f"cuda")\nname = f"cuda_{i}"\n',
        'names.append("cuda")\nbackends.add("cuda")\n',  # a collection whose name says no device
        'for impl in ["ref"] + ["cuda"]:\n    run(impl)\nname = "cuda" + suffix\n',  # an f-string that is no device, or not in a device position
        '# model.to("cuda")\nx = 1\n',
        'def f():\n    """Example: model.to("cuda")"""\n',
        "activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]\n",
        "import torch\ndevice = torch.accelerator.current_accelerator()\nx.to(device)\n",
        "from utils import get_device\nmodel.to(get_device())\n",
        'name = "cuda" if fast else "ref"\n',
        'kind = "cuda"\nrun(kind)\n',  # bound to a name never used as a device
        'label = "cuda:" + str(i)\n',  # a joined prefix that is not used as a device
        'def f():\n    where = "cuda"\n\n\ndef g(m):\n    return m.to(where)\n',  # another scope
        'd = {"cuda": "nccl", "cpu": "gloo"}\n',
        # a lookup whose key names no device, and a selector's fallback
        'import os\nimpl = os.environ.get("FLA_CONV_BACKEND", "cuda")\narch = getattr(args, "gpu_arch_type", "cuda")\n',
        # a second run: the CUDA key already has its target twin
        'torch.load(path, map_location={"cuda:0": "cpu", "neuron:0": "cpu"})\n',
        'x.to("neuron")\n',
        'import torch\nwith torch.autocast("cuda"):\n    pass\n',
        "if device == 'cuda':\n    pass\n",  # a comparison: CN103
        'def get_kernel():\n    return "cuda"\n',  # a helper not named for a device
        # A record's field, only written out: which device made an image, not where to put it.
        'class Meta:\n    rand_device = None\n\n    def line(self):\n        return f"{self.rand_device}"\n\n\n'
        'def parse(node):\n    meta = Meta()\n    meta.rand_device = "cuda"\n    return meta\n',
        # A device a test writes into a parser or constructor and asserts back is the test's data
        # (lm-evaluation-harness's CLI tests): "neuron" on one side breaks it, on both does nothing.
        'from argparse import Namespace\n\ndef test_cli():\n    ns = Namespace(device="cuda:1")\n'
        '    assert Config.from_cli(ns).device == "cuda:1"\n',
        'import argparse\n\ndef test_model_args():\n    parser = argparse.ArgumentParser()\n'
        '    args = parser.parse_args(["--model_args", "pretrained=gpt2,device=cuda"])\n'
        '    assert args.model_args == {"pretrained": "gpt2", "device": "cuda"}\n',
        # parametrized arguments whose name does not say device
        'import pytest\n\n@pytest.mark.parametrize("impl", ["ref", "cuda"])\ndef test(impl):\n    pass\n',
        'import pytest\n\n@pytest.mark.parametrize("impl,device", [("cuda", "cpu")])\ndef test(impl, device):\n    pass\n',
    )
    INVALID = (
        Invalid('import torch\nd = torch.device("cuda")\n', 'import torch\nd = torch.device("neuron")\n'),
        # The device picked when CUDA is there (xformers' test device list), whatever takes it.
        Invalid(
            'import torch\n_devices = ["cpu"]\n_devices += ["cuda"] if torch.cuda.is_available() else []\n',
            'import torch\n_devices = ["cpu"]\n_devices += ["neuron"] if torch.cuda.is_available() else []\n',
        ),
        # A test parametrized over devices runs on each value, as a loop over them does.
        Invalid(
            'import pytest\n\n@pytest.mark.parametrize("device", ["cpu", "cuda"])\ndef test(device):\n    pass\n',
            'import pytest\n\n@pytest.mark.parametrize("device", ["cpu", "neuron"])\ndef test(device):\n    pass\n',
        ),
        Invalid(
            'import pytest\n\n@pytest.mark.parametrize("dtype, device", [(1, "cuda"), pytest.param(2, "cuda:1", id="two")])\n'
            "def test(dtype, device):\n    pass\n",
            'import pytest\n\n@pytest.mark.parametrize("dtype, device", [(1, "neuron"), pytest.param(2, "neuron:1", id="two")])\n'
            "def test(dtype, device):\n    pass\n",
        ),
        Invalid('import torch\nd = torch.device("cuda", i)\n', 'import torch\nd = torch.device("neuron", i)\n'),
        # What a helper named for a device returns is a device.
        Invalid(
            'import torch\n\ndef get_device():\n    return "cuda" if torch.cuda.is_available() else "cpu"\n',
            'import torch\n\ndef get_device():\n    return "neuron" if torch.cuda.is_available() else "cpu"\n',
        ),
        Invalid(
            'parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])\n',
            'parser.add_argument("--device", default="neuron", choices=["neuron", "cpu"])\n',
        ),
        Invalid("import torch\nd = torch.device('cuda:1')\n", "import torch\nd = torch.device('neuron:1')\n"),
        Invalid('import torch as th\nd = th.device(type="cuda")\n', 'import torch as th\nd = th.device(type="neuron")\n'),
        Invalid('model.to("cuda")\n', 'model.to("neuron")\n'),
        Invalid('x = x.to(device="cuda:0", non_blocking=True)\n', 'x = x.to(device="neuron:0", non_blocking=True)\n'),
        Invalid('x = torch.zeros(3, device="cuda")\n', 'x = torch.zeros(3, device="neuron")\n'),
        Invalid(
            'model = AutoModel.from_pretrained(path, device_map="cuda")\n',
            'model = AutoModel.from_pretrained(path, device_map="neuron")\n',
        ),
        # A library known to hand the device to torch takes "neuron"; one that parses it itself,
        # not: reported, kept.
        Invalid(
            'from transformers import AutoModel\nmodel = AutoModel.from_pretrained(path, device_map="cuda")\n',
            'from transformers import AutoModel\nmodel = AutoModel.from_pretrained(path, device_map="neuron")\n',
        ),
        Invalid('from safetensors.torch import load_file\nstate = load_file(path, device="cuda")\n'),
        # The buffers of a TensorRT engine and the inputs of a CUDA kernel's test stay CUDA.
        Invalid(
            'import torch\n\ndef infer(ctx, x):\n    out = torch.empty(8, device="cuda")\n'
            "    ctx.execute_v2([x.data_ptr(), out.data_ptr()])\n    return out.cpu()\n"
        ),
        Invalid('x = make(device=f"cuda:{rank}")\n', 'x = make(device=f"neuron:{rank}")\n'),
        Invalid('x.to("cuda:%d" % i)\n', 'x.to("neuron:%d" % i)\n'),
        Invalid('x.to("cuda:{}".format(i))\n', 'x.to("neuron:{}".format(i))\n'),
        Invalid('import torch\nd = torch.device("cuda:" + str(rank))\n', 'import torch\nd = torch.device("neuron:" + str(rank))\n'),
        Invalid('def f(x, device="cuda"):\n    pass\n', 'def f(x, device="neuron"):\n    pass\n'),
        # The record's field is read as a device too: it places noise.
        Invalid(
            'import torch\nclass Meta:\n    rand_device = None\n\n    def noise(self):\n        return torch.randn(2, device=self.rand_device)\n\n\n'
            'def parse(node):\n    meta = Meta()\n    meta.rand_device = "cuda"\n    return meta\n',
            'import torch\nclass Meta:\n    rand_device = None\n\n    def noise(self):\n        return torch.randn(2, device=self.rand_device)\n\n\n'
            'def parse(node):\n    meta = Meta()\n    meta.rand_device = "neuron"\n    return meta\n',
        ),
        Invalid('device = "cuda"\n', 'device = "neuron"\n'),
        Invalid('self.device = "cuda:0"\n', 'self.device = "neuron:0"\n'),
        Invalid('args.device = f"cuda:{args.local_rank}"\n', 'args.device = f"neuron:{args.local_rank}"\n'),
        Invalid('cfg["device"] = "cuda"\n', 'cfg["device"] = "neuron"\n'),
        Invalid('DEVICE: str = "cuda"\n', 'DEVICE: str = "neuron"\n'),
        Invalid(
            'parser.add_argument("--device", type=str, default="cuda", help="cuda or cpu")\n',
            'parser.add_argument("--device", type=str, default="neuron", help="cuda or cpu")\n',
        ),
        Invalid('config = {"device": "cuda", "impl": "cuda"}\n', 'config = {"device": "neuron", "impl": "cuda"}\n'),
        Invalid(
            'device = "cuda" if torch.cuda.is_available() else "cpu"\n',
            'device = "neuron" if torch.cuda.is_available() else "cpu"\n',
        ),
        Invalid('device = args.device or "cuda"\n', 'device = args.device or "neuron"\n'),
        # The fallback of a lookup whose key says device is what the lookup returns.
        Invalid(
            'import os\ndevice = getattr(args, "device", "cuda")\nname = os.environ.get("TORCH_DEVICE", "cuda")\n'
            'd = cfg.get("device", "cuda:0")\ne = os.getenv("DEVICE", "cuda")\n',
            'import os\ndevice = getattr(args, "device", "neuron")\nname = os.environ.get("TORCH_DEVICE", "neuron")\n'
            'd = cfg.get("device", "neuron:0")\ne = os.getenv("DEVICE", "neuron")\n',
        ),
        Invalid('devices = ["cuda:0", "cuda:1"]\n', 'devices = ["neuron:0", "neuron:1"]\n'),
        # The devices a loop runs over (detectron2's tests: CUDA joins the list when available).
        Invalid(
            'for device in ["cpu"] + (["cuda"] if ok else []):\n    run(device)\nxs = [run(dev) for dev in ("cpu", "cuda:0")]\n',
            'for device in ["cpu"] + (["neuron"] if ok else []):\n    run(device)\nxs = [run(dev) for dev in ("cpu", "neuron:0")]\n',
        ),
        # An element added to a collection of devices (detectron2's test device list).
        Invalid(
            'devices = ["cpu"]\ndevices.append(f"cuda:{n - 1}")\ndevices.insert(0, "cuda:0")\n',
            'devices = ["cpu"]\ndevices.append(f"neuron:{n - 1}")\ndevices.insert(0, "neuron:0")\n',
        ),
        Invalid(
            'import torch\ng = torch.Generator(device="cuda")\n', 'import torch\ng = torch.Generator(device="neuron")\n'
        ),
        Invalid('import torch\ns = torch.load(p, "cuda")\n', 'import torch\ns = torch.load(p, "neuron")\n'),
        Invalid('s = torch.load(p, map_location="cuda:%d" % rank)\n', 's = torch.load(p, map_location="neuron:%d" % rank)\n'),
        Invalid(
            "s = torch.load(p, map_location={'cuda:%d' % 0: 'cuda:%d' % rank})\n",
            "s = torch.load(p, map_location={'cuda:%d' % 0: 'neuron:%d' % rank, 'neuron:%d' % 0: 'neuron:%d' % rank})\n",
        ),
        Invalid(
            'torch.load(path, map_location={"cuda:0": "cpu"})\n',
            'torch.load(path, map_location={"cuda:0": "cpu", "neuron:0": "cpu"})\n',
        ),
        Invalid(
            'import torch\ns = torch.load(p, map_location=torch.device("cuda"))\n',
            'import torch\ns = torch.load(p, map_location=torch.device("neuron"))\n',
        ),
        Invalid(
            'device_type = "cuda" if "cuda" in device else "cpu"\n',
            'device_type = "neuron" if "cuda" in device else "cpu"\n',
        ),
        Invalid('run(x, device_type="cuda")\n', 'run(x, device_type="neuron")\n'),
        # A plain name bound to a device string and later used as a device (the literal is followed).
        Invalid(
            'import torch\nif ok:\n    arg = "cuda:0"\nelse:\n    arg = "cpu"\nd = torch.device(arg)\n',
            'import torch\nif ok:\n    arg = "neuron:0"\nelse:\n    arg = "cpu"\nd = torch.device(arg)\n',
        ),
        Invalid('def f(m):\n    where = "cuda"\n    return m.to(where)\n', 'def f(m):\n    where = "neuron"\n    return m.to(where)\n'),
        # f-strings without a placeholder are plain device strings.
        Invalid('import torch\nd = torch.device(f"cuda")\n', 'import torch\nd = torch.device(f"neuron")\n'),
        Invalid("x = torch.zeros(3, device=f'cuda:0')\n", "x = torch.zeros(3, device=f'neuron:0')\n"),
        Invalid(
            'import torch\nd = torch.device(f"cuda")\n',
            "import torch\nd = torch.device((torch.accelerator.current_accelerator() or torch.get_default_device()).type)\n",
            target="accelerator",
        ),
        Invalid(
            'import torch\nx.to(f"cuda:1")\n',
            "import torch\nx.to(f\"{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:1\")\n",
            target="accelerator",
        ),
        Invalid(
            'import torch\nd = torch.device("cuda")\n',
            "import torch\nd = torch.device((torch.accelerator.current_accelerator() or torch.get_default_device()).type)\n",
            target="accelerator",
        ),
        Invalid(
            'import torch\nx.to("cuda:1")\n',
            'import torch\nx.to(f"{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:1")\n',
            target="accelerator",
        ),
        Invalid(
            'import torch\nx.to(f"cuda:{rank}")\n',
            'import torch\nx.to(f"{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:{rank}")\n',
            target="accelerator",
        ),
        Invalid(
            'import torch\nstate = torch.load(p, map_location="cuda:0")\n',
            'import torch\nstate = torch.load(p, map_location=f"{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:0" if torch.accelerator.is_available() else "cpu")\n',
            target="accelerator",
        ),
        Invalid(
            'import torch\nx.to("cuda:{}".format(i))\n',
            'import torch\nx.to(f"{(torch.accelerator.current_accelerator() or torch.get_default_device()).type}:{{}}".format(i))\n',
            target="accelerator",
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """The visits below on CPython's ``ast`` (``_Detector``), on the neuron target only (the
        accelerator target builds expressions, not a renamed literal)."""
        if settings.target != NEURON:
            return None
        return _Detector(cls, file, settings).made_findings()

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" not in node.value:  # cheap test before any walking
            return
        if is_bare_prefix(node) and not _joined_prefix(node, self.context.parent):
            return
        built = retarget_string(self, node)
        if built is None:
            # Under a min-torch without torch.accelerator the device cannot be written: the
            # string is reported (if it is a device), never left silently.
            if is_cuda_device_string(node) and needs_newer_torch(self):
                self._report(node, None)
            return
        self._report(node, built)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if not looks_like_cuda_fstring(node):
            return
        built = retarget_fstring(self, node)
        if built is not None:
            self._report(node, built)
        elif needs_newer_torch(self):
            self._report(node, None)

    def __init__(self, context) -> None:
        super().__init__(context)
        # ``arg = "cuda:0"`` ... ``torch.device(arg)``: strings bound to a name that does not say
        # device wait here, keyed by (scope, name), until the name shows up in a device position
        # in the same scope; they are reported when the module is left.
        self._pending: dict[tuple[int, str], list[tuple[cst.BaseExpression, tuple, tuple]]] = {}
        self._used_as_device: set[tuple[int, str]] = set()
        # Scopes are made while walking; holding them keeps their id() from being reused by a
        # later scope (which would join two unrelated functions' names).
        self._scopes: list[object] = []

    def visit_Name(self, node: cst.Name) -> None:
        if not self._pending:  # cheap: most files bind no cuda string to a plain name
            return
        key = (id(self.context.scope), node.value)
        if key not in self._pending or key in self._used_as_device:
            return
        use = find_use(self, node)
        if use is not None and use.kind is UseKind.PLACEMENT and use.what != "map-key":
            self._used_as_device.add(key)

    def leave_Module(self, original_node: cst.Module) -> None:
        for key in self._used_as_device:
            for node, built, ancestors in self._pending[key]:
                # Reported after the walk: say where the node sits.
                self._emit(node, built, ancestors)

    def _report(self, node: cst.BaseExpression, built: tuple[cst.BaseExpression, tuple] | None) -> None:
        use = find_use(self, node)
        if use is not None and use.kind is UseKind.BINDING:
            self._scopes.append(self.context.scope)
            entry = (node, built, tuple(self.context.ancestors))
            self._pending.setdefault((id(self.context.scope), use.what), []).append(entry)
            return
        if use is None or use.kind is not UseKind.PLACEMENT:
            return
        if is_test_data(self, node):
            return  # `Namespace(device="cuda:1")` ... `assert cfg.device == "cuda:1"`: a test's data
        if isinstance(use.user, cst.Assign) and recorded_only(self, use.user):
            return  # `props.rand_device = "cuda"` in a record: which device made it, not where to go
        kernel = handed_to_kernel(self, node) or kernel_test(self)
        if kernel is None and pointer_buffer(self, node):
            kernel = "its tensor's raw pointer (`data_ptr()`) is handed to CUDA code (a TensorRT binding, an extension)"
        if kernel is not None:
            # A device of CUDA-only code's own (a simulator's, a TensorRT engine's): a neuron one
            # would only move the failure; the port replaces the call, and the device with it.
            self.report(
                node,
                f"`{self.context.code(node)}` is handed to CUDA-only code: {kernel}",
                guidance="left as is: the callee runs on NVIDIA GPUs only. Port the call (see its finding), then "
                "give the replacement the target device.",
                effort=Effort.LOW,
            )
            return
        reader = device_reader(self, node) or option_reader(self, node) or label_handed(self, node)
        outcome, reached = "raises on any other device", "the raise"
        if reader is None:
            # `device = init_device(args)` returns the option's device to a test of its own.
            reader = returned_option(self)
            outcome, reached = 'takes its other branch on "neuron"', "that test's other branch"
        if reader is not None:
            # The value crosses a call into a test that a safe run leaves on "cuda": moved alone,
            # the port fails (the test's `else` raises) or runs other code (it picks a branch)
            # where the original ran this one. Where the test's own fix is unsafe,
            # --unsafe-fixes moves both; otherwise neither moves.
            where, unsafe = reader
            message = f"`{self.context.code(node)}` reaches {where}; that test stays \"cuda\" in a safe run and {outcome}"
            if unsafe and built is not None and use.what != "map-key":
                self.report(
                    node, message, replacement=built[0], safety=Safety.UNSAFE, imports=built[1],
                    guidance='"neuron" here must move with that test: --unsafe-fixes moves both.',
                    description="name the target device", effort=Effort.LOW,
                )
            else:
                self.report(
                    node, message, effort=Effort.LOW,
                    guidance=f'left as is: "neuron" here would reach {reached}. Port that test first, then write "neuron" here.',
                )
            return
        callee = library_callee(self, node)
        if callee is None or takes_torch_device(callee):
            callee = library_callee_by_name(self, node)
        if callee is not None and not takes_torch_device(callee):
            message, guidance = _library_message(self.context.code(node), callee)
            self.report(node, message, guidance=guidance, effort=Effort.LOW)
            return
        if use.what == "map-key":
            if built is not None:
                self._twin_key(node, built, use)
            return
        # Only a whole argument or dict value: `"cuda:%d" % rank` keeps its template shape.
        if built is not None and use.what == "map_location" and not _bare_device(node) and isinstance(self.context.parent, (cst.Arg, cst.DictElement)):
            built = checkpoint_device(self, built)
        self._emit(node, built, depends=self._torch_cuda_call())

    def _torch_cuda_call(self) -> tuple[cst.CSTNode, ...]:
        """The ``torch.cuda.*`` call the visited string is an argument of: the string is that
        call's device, and moves only when the call does. InvokeAI's ``torch.cuda.is_available()
        and torch.cuda.get_device_properties("cuda").major <= 7`` keeps its calls on CUDA (they
        pick a path that calls ``torch.cuda.mem_get_info``); the string alone had become
        ``get_device_properties("neuron")``, a CUDA call asked about a Neuron device."""
        ancestors = self.context.ancestors
        if len(ancestors) < 2 or not isinstance(ancestors[-1], cst.Arg) or not isinstance(ancestors[-2], cst.Call):
            return ()
        call = ancestors[-2]
        qualified = self.qualname(call.func)
        return (call,) if qualified is not None and qualified.startswith("torch.cuda.") else ()

    def _twin_key(self, node: cst.BaseExpression, built: tuple[cst.BaseExpression, tuple], use) -> None:
        """``map_location={"cuda:0": dst}`` gains ``"neuron:0": dst`` next to the CUDA key.

        The key names where a checkpoint was *saved*: checkpoints from CUDA runs hold "cuda:0"
        storages, checkpoints saved by the port hold "neuron:0" ones. Renaming the key would
        break the first kind, keeping it the second; both keys load both.
        """
        element = use.user
        dictionary = use.above[-1] if use.above else None
        if not isinstance(element, cst.DictElement) or not isinstance(dictionary, cst.Dict):
            return
        replacement, imports = built
        new_key = element.key.deep_replace(node, replacement) if element.key is not node else replacement
        new_code = cst.Module([]).code_for_node(new_key)
        if any(
            isinstance(e, cst.DictElement) and cst.Module([]).code_for_node(e.key) == new_code
            for e in dictionary.elements
        ):
            return  # already twinned (second run)
        elements: list[cst.BaseDictElement] = []
        for e in dictionary.elements:
            if e is element:
                comma = e.comma
                elements.append(e.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
                elements.append(e.with_changes(key=new_key, comma=comma))
            else:
                elements.append(e)
        self.report(
            dictionary,
            f"`{self.context.code(element.key)}` in map_location names a CUDA device; checkpoints "
            "saved by the port hold the target device instead",
            replacement=dictionary.with_changes(elements=elements),
            safety=Safety.SAFE,
            imports=imports,
            guidance="keep the CUDA key for checkpoints saved on CUDA and add the target key",
            description="map the target device's key too",
            # The fix rebuilds the dict around the visited key.
            ancestors=use.above[:-1],
        )

    def _emit(
        self,
        node: cst.BaseExpression,
        built: tuple[cst.BaseExpression, tuple] | None,
        ancestors: tuple[cst.CSTNode, ...] | None = None,
        depends: tuple[cst.CSTNode, ...] = (),
    ) -> None:
        if built is None:
            self.report(
                node,
                f"`{self.context.code(node)}` names a CUDA device",
                guidance=needs_newer_torch(self) or _GUIDANCE,
                effort=Effort.LOW,
                ancestors=ancestors,
            )
            return
        replacement, imports = built
        self.report(
            node,
            f"`{self.context.code(node)}` names a CUDA device",
            replacement=replacement,
            safety=Safety.SAFE,
            imports=imports,
            guidance=_GUIDANCE,
            description="name the target device",
            ancestors=ancestors,
            depends=depends,
        )


class _Detector(AstDetector):
    """``CudaDeviceString``'s visits on CPython's ``ast`` (``_strings_ast``): the same findings,
    fixes included, where every "cuda" device literal of the file sits in a position the port
    follows and no hold can keep it (no kernel index, no raw pointer, no reader in another
    module, no record). Unsure (None) for an f-string naming CUDA, a ``map_location`` dict, a pytest parametrization, an
    argument of a ``torch.cuda`` call (the literal moves with the call: a dependency a
    finding does not carry)."""

    def __init__(self, rule: type[Rule], file, settings: Settings) -> None:  # noqa: ANN001 - python.AstFile
        super().__init__(rule, file)
        self.settings = settings
        self._kernels: _strings_ast.KernelNames | None = None
        self._round_trip: tuple | None = None
        # The visitor's `_pending` / `_used_as_device`: literals bound to a plain name, reported
        # when the module is left if the name is used as a device in the same scope.
        self._pending: dict[tuple[int, str], list[tuple[ast.Constant, tuple[object, ...]]]] = {}
        self._used_as_device: set[tuple[int, str]] = set()
        self._scopes: list[object] = []

    def _name_use(self, node, name: str) -> None:  # noqa: ANN001 - ast.Name or the walk's KeywordName
        if not self._pending:
            return
        key = (id(self.ctx.scope), name)
        if key not in self._pending or key in self._used_as_device:
            return
        use = _strings_ast.find_use(self.ctx, node)
        if use is not None and use.kind is UseKind.PLACEMENT and use.what != "map-key":
            self._used_as_device.add(key)

    def visit_Name(self, node: ast.Name) -> None:
        self._name_use(node, node.id)

    def visit_KeywordName(self, node) -> None:  # noqa: ANN001 - the walk's KeywordName
        # libcst visits a keyword argument's name as a Name too.
        self._name_use(node, node.id)

    def leave_Module(self, node: ast.Module) -> None:
        for key in self._used_as_device:
            for bound, ancestors in self._pending[key]:
                _program_links(ancestors, bound, self.file.tree)
                self._reports.append((bound, None, ancestors))

    def _finding(self, node: ast.Constant, callee: str | None, ancestors: tuple[object, ...]) -> Finding:
        from cuda2neuron.python import generated_text

        start, _ = self.file.bounds(node)
        code = generated_text(self.file, node, ancestors, start, 0, "")
        if callee is not None:
            message, guidance = _library_message(code, callee)
            return self.finding(node, message, guidance, Effort.LOW)
        prefix, quote, _ = _quote_of(self.file.text[start : self.file.bounds(node)[1]])
        at = start + len(prefix) + len(quote)
        fix = Fix(Safety.SAFE, generated_text(self.file, node, ancestors, at, len("cuda"), NEURON), "name the target device")
        return self.finding(node, f"`{code}` names a CUDA device", _GUIDANCE, Effort.NONE, fix)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        from cuda2neuron.python import Unsure

        if "cuda" in _strings_ast.literal_text(self.file, node) and _strings_ast.fstring_may_report(self.file, node):
            raise Unsure("an f-string that may name a CUDA device")

    def visit_Constant(self, node: ast.Constant) -> None:
        from cuda2neuron.python import Unsure

        if not isinstance(node.value, (str, bytes)) or self.ctx.fstrings:
            return  # an f-string's text is no SimpleString (and one naming CUDA is unsure above)
        text = _strings_ast.literal_text(self.file, node)
        if "cuda" not in text:
            return
        if not _strings_ast.simple_string(self.file, node):
            return  # an implicit concatenation: libcst's parts have no use (ConcatenatedString)
        value = _strings_ast.string_value(node)
        if value is None:
            return
        parent = self.ctx.parent
        if value == _PREFIX and not (isinstance(parent, ast.BinOp) and parent.left is node and isinstance(parent.op, ast.Add)):
            return  # `is_bare_prefix` and not `_joined_prefix`
        if not (value == _PREFIX or _DEVICE_RE.match(value)):
            return
        if not _quote_of(text)[2].startswith("cuda"):
            return  # escapes: retarget_string leaves it
        self._report(node)

    def _round_trip_facts(self) -> tuple:
        """The module's import qualifier and parameter names, as the round-trip decision reads
        them (``rules/_shared/round_trip``), built once per file when a test asks."""
        if self._round_trip is None:
            self._round_trip = (module_qualifier(self.file.tree), module_params(self.file.tree))
        return self._round_trip

    def _report(self, node: ast.Constant) -> None:
        from cuda2neuron.python import Unsure

        ctx, facts = self.ctx, self.settings.project
        use = _strings_ast.find_use(ctx, node)
        if use is not None and use.kind is UseKind.BINDING:
            self._scopes.append(ctx.scope)
            self._pending.setdefault((id(ctx.scope), use.what), []).append((node, tuple(ctx.ancestors)))
            return
        if use is None or use.kind is not UseKind.PLACEMENT:
            return
        test = next((a for a in reversed(ctx.ancestors) if isinstance(a, _FUNCTIONS)), None)
        if test is not None and test.name.startswith("test") and round_trip_texts(test, *self._round_trip_facts()):
            raise Unsure("a test that writes a device and asserts it back (is_test_data)")
        user = use.user
        if isinstance(user, ast.Assign) and len(user.targets) == 1:
            target = user.targets[0]
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id not in ("self", "cls"):
                raise Unsure("a field a record may only write out (recorded_only)")
        if self._kernels is None:
            # Words that build CUDA-only code without an import: unsure outright; else the
            # indexed names, a superset of the kernel index's.
            if _strings_ast.KERNEL_WORDS.search(self.file.text) is not None or _strings_ast.requirement_literal(self.file, facts):
                raise Unsure("the file may build or select CUDA-only code (kernel_index)")
            self._kernels = _strings_ast.KernelNames(self.file, facts)
        if _strings_ast.handed_to_kernel(ctx, node, self._kernels) or _strings_ast.kernel_test(ctx, self._kernels):
            raise Unsure("the device may be handed to CUDA-only code (handed_to_kernel, kernel_test)")
        if "data_ptr" in self.file.text:
            raise Unsure("a raw pointer is taken (pointer_buffer)")
        if facts.device_readers or facts.option_readers or facts.returned_options or facts.label_readers:
            raise Unsure("another module may read the device (device_reader, option_reader, returned_option, label_handed)")
        callee = _strings_ast.library_callee(ctx, node, facts)
        if callee is None or takes_torch_device(callee):
            callee = _strings_ast.library_callee_by_name(ctx, node, facts)
        if callee is not None and not takes_torch_device(callee):
            self._reports.append((node, callee, tuple(ctx.ancestors)))
            return
        ancestors = ctx.ancestors
        if len(ancestors) >= 2 and isinstance(ancestors[-1], ArgNode) and isinstance(ancestors[-2], ast.Call):
            if (ctx.qualname(ancestors[-2].func) or "").startswith("torch.cuda."):
                raise Unsure("the device of a torch.cuda call moves with the call (_torch_cuda_call)")
        _program_links(ancestors, node, self.file.tree)
        self._reports.append((node, None, tuple(ancestors)))


# Calls whose arguments are a message (python/_flows.py's `_MESSAGE_CALLS`).
_MESSAGE_CALLS = frozenset({"print", "warn", "warning", "info", "debug", "error", "exception", "critical", "fatal", "log"})
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _program_links(ancestors: list[object] | tuple[object, ...], node: ast.AST, module: ast.Module) -> None:
    """Raise ``Unsure`` where the program pass (``python/_flows.link_program``) could link the
    fix to code elsewhere and so weaken it: a message under a CUDA test (``_follow_guards``), or
    a value bound to a name (``_binding``) that a test, an ``assert``, an f-string or (for a
    flag) an ``and``/``or`` of its scope mentions (``_link_readers``: such a read may ask about
    CUDA). A registered buffer, an option's default or choices and a value kept on ``self`` by
    a constructor that calls ``super()`` are unsure too."""
    from cuda2neuron.python import Unsure

    for anc in reversed(ancestors):
        if isinstance(anc, (ast.Raise, ast.JoinedStr)):
            raise Unsure("a message (link_program's _follow_guards)")
        if isinstance(anc, ast.Call):
            func = anc.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in _MESSAGE_CALLS:
                raise Unsure("a message (link_program's _follow_guards)")
        if isinstance(anc, (ast.stmt, ast.Lambda)):
            break
    chain = (*ancestors, node)
    found = _binding(chain, module)
    if found is None:
        return
    scope, names, flag = found
    regions = [(scope, names)]
    if isinstance(scope, _FUNCTIONS):
        owner = chain[chain.index(scope) - 1] if chain.index(scope) >= 1 else None
        if isinstance(owner, ast.ClassDef):
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super" for stmt in scope.body for n in ast.walk(stmt)):
                raise Unsure("a constructor handing its parameters to a base (_handed_to_base)")
            kept = {
                f"self.{t.attr}"
                for stmt in scope.body
                for a in ast.walk(stmt)
                if isinstance(a, ast.Assign) and _read_name(a.value) in names
                for t in a.targets
                if _on_self(t)
            }
            if kept:
                regions.append((owner, frozenset(kept)))
    for region, wanted in regions:
        if _mentioned_in_reads(region, wanted, flag):
            raise Unsure("a test, an assert, an f-string or an and/or reads the bound value (link_program)")


def _read_name(node: object) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _on_self(target: object) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"


def _function(chain: tuple[object, ...], below: int) -> ast.AST | None:
    for k in range(below - 1, -1, -1):
        if isinstance(chain[k], _FUNCTIONS):
            return chain[k]  # type: ignore[return-value]
        if isinstance(chain[k], (ast.ClassDef, ast.Lambda)):
            return None
    return None


def _class(chain: tuple[object, ...], below: int) -> ast.ClassDef | None:
    for k in range(below - 1, 0, -1):
        if isinstance(chain[k], _FUNCTIONS):
            owner = chain[k - 1]
            return owner if isinstance(owner, ast.ClassDef) else None
        if isinstance(chain[k], (ast.ClassDef, ast.Lambda)):
            return None
    return None


def _binding(chain: tuple[object, ...], module: ast.Module) -> tuple[ast.AST, frozenset[str], bool] | None:
    """``_flows._binding`` on ``ast``: (the scope that reads the value, the names it is read by,
    whether the value is a flag (``_is_flag``)); None where the program pass binds nothing."""
    from cuda2neuron.python import Unsure

    for i in range(len(chain) - 2, -1, -1):
        anc, child = chain[i], chain[i + 1]
        if isinstance(anc, ArgNode) and child is anc.value and i >= 1 and isinstance(chain[i - 1], ast.Call):
            func = chain[i - 1].func
            if isinstance(func, ast.Attribute) and func.attr in ("register_buffer", "register_parameter", "add_argument"):
                raise Unsure("a registered buffer or an option (link_program)")
        if isinstance(anc, ast.arg):
            if child is anc.annotation or i < 1 or not isinstance(chain[i - 1], _FUNCTIONS):
                return None
            return chain[i - 1], frozenset({anc.arg}), _flag_value(child)
        if isinstance(anc, ast.Return):
            owner = _function(chain, i)
            if child is not anc.value or owner is None or not any(owner is s for s in module.body):
                return None
            results = frozenset(
                t.id
                for s in module.body
                if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name) and s.value.func.id == owner.name
                for t in s.targets
                if isinstance(t, ast.Name)
            )
            return (module, results, _flag_value(child)) if results else None
        if isinstance(anc, (ast.Assign, ast.AnnAssign)):
            if child is not anc.value:
                return None
            targets = anc.targets if isinstance(anc, ast.Assign) else [anc.target]
            names = frozenset(t.id for t in targets if isinstance(t, ast.Name))
            scope = _function(chain, i)
            if names and scope is not None:
                return scope, names, _flag_value(child)
            attributes = frozenset(f"self.{t.attr}" for t in targets if _on_self(t))
            if not attributes:
                if any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) for t in targets):
                    raise Unsure("a value stored on an instance (stored_on_instance)")
                return None
            owner = _class(chain, i)
            return (owner, attributes, _flag_value(child)) if owner is not None else None
        if isinstance(anc, (ast.stmt, ast.Lambda)):
            return None
    return None


def _flag_value(value: object) -> bool:
    """``_flows._is_flag``, wider: a call or an attribute counts too (a flag links more reads)."""
    return isinstance(value, (ast.Compare, ast.UnaryOp, ast.BoolOp, ast.Call, ast.Attribute))


def _mentions(node: ast.AST, names: frozenset[str]) -> bool:
    """Does ``node`` spell one of ``names`` (libcst's walk meets every ``Name``: a keyword's and a
    lambda parameter's too)?"""
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in names:
            return True
        if isinstance(n, ast.Attribute) and _read_name(n) in names:
            return True
        if isinstance(n, ast.keyword) and n.arg in names:
            return True
        if isinstance(n, ast.arg) and n.arg in names:
            return True
    return False


def _mentioned_in_reads(region: ast.AST, names: frozenset[str], flag: bool) -> bool:
    body = region.body if isinstance(region, (*_FUNCTIONS, ast.ClassDef, ast.Module)) else [region]
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert)) and _mentions(n.test, names):
                return True
            if isinstance(n, ast.JoinedStr) and _mentions(n, names):
                return True
            if flag and isinstance(n, ast.BoolOp) and _mentions(n, names):
                return True
    return False
