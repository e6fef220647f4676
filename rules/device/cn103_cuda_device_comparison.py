"""CN103: comparisons of a device with "cuda"."""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m

from cuda2neuron.core import Effort, Finding, Invalid, Rule, Safety, Settings
from cuda2neuron.python import dotted_name

from .._shared.detector import AstDetector
from .._shared.kernel_gates import report_kernel_gate
from .._shared.left_properties import left_property
from .._shared.label_readers import held_label
from .._shared.selected import opened_code, selected_code
from .._shared.target import needs_newer_torch
from . import _strings_ast
from ._helpers import UseKind, comparison_safety, find_use, is_bare_prefix, is_test_data, looks_like_cuda_fstring, retarget_fstring, retarget_string

__all__ = ["CudaDeviceComparison"]

_GUIDANCE = (
    "this test picks a code path written for CUDA: if the branch calls CUDA-only code (custom "
    "kernels, Triton, flash-attn) keep the test as is so that the fallback runs on Neuron; "
    'otherwise compare with "neuron"'
)


class CudaDeviceComparison(Rule):
    """
    ## What it does
    Rewrites the "cuda" side of tests on a device (``==``, ``!=``, ``in``, ``startswith``,
    ``replace``, a test case's ``self.assertEqual``/``assertIn``). For example ``x.device.type == "cuda"``, ``device == "cuda"``,
    ``device != "cuda:0"``, ``"cuda" in device``, ``device in ("cuda", "mps")``,
    ``device.startswith("cuda")``, ``str(device).replace("cuda:", "")`` — when the other side
    is named like a device (``device``, ``device_type``, ``args.device``, ``x.device.type``,
    ``str(x.device)``, ``getattr(device, "type", None)``, ``get_current_device()``, an element
    ``devices[0]`` of a collection of devices).

    ## Why is this bad?
    Once placement says ``"neuron"``, a test for ``"cuda"`` is always false: pinned memory,
    fused optimizers, autocast device types and synchronisation chosen by it silently take the
    CPU path. LLM trainers derive ``device_type = "cuda" if "cuda" in device else "cpu"`` and
    feed it to autocast: the string in the test and the default must change together.

    ## Example
    ```python
    device_type = "cuda" if "cuda" in device else "cpu"
    pin = x.device.type == "cuda"
    ```
    becomes
    ```python
    device_type = "neuron" if "neuron" in device else "cpu"
    pin = x.device.type == "neuron"
    ```

    ## Fix safety
    Depends on what the test selects. *Data* — it is assigned, passed or returned, picks between
    plain values or data moves (``t.to(rank) if ... else t``), or guards an ``if`` whose branches
    only move tensors (``x.pin_memory().to(device)``) or only raise a built-in exception
    (``if device.type != "cuda": raise ValueError(...)``, a check like ``assert``): safe. *Code* — the test of an
    ``if``/``while`` or conditional expression whose branches call torch (``torch.cuda.synchronize()``):
    unsafe, applied with ``--unsafe-fixes``. Branches that call anything else (``fused(x)``, a
    Triton kernel, flash-attn): display-only, because such a guard usually protects a CUDA-only
    kernel whose pure-PyTorch fallback is what must run on Neuron; the same for a test
    joined with a check that an optional library is present (``if HAS_TRITON and
    x.device.type == "cuda"``). A test that feeds
    ``fused=`` (``use_fused = device_type == "cuda"``) is left alone: False on Neuron picks the
    plain optimizer, which is right. Tests of the bare ``"cuda:"`` prefix are input parsing and
    always safe, so ``spec.startswith("cuda:")`` and ``spec[len("cuda:"):]`` change together.
    Comparisons with a name that does not say device (``impl in ["ref", "cuda"]``) are never
    touched. A test that stands in front of a CUDA-only kernel the file knows (an input check
    ``assert x.device.type == "cuda"`` of a function that launches a Triton kernel, a flag
    ``use_kernel = x.device.type == "cuda"`` that picks a compiled extension's call) is reported
    without a fix, as CN104 and CN201 do: False on Neuron is the meaning to keep. An assertion
    that compares back a device the test itself wrote into a parser, a constructor or a config
    file (``Namespace(device="cuda:1")`` ... ``assert cfg.device == "cuda:1"``) checks the
    parsing, not a device: left alone, unless the test hands that device (or what it parsed) to
    torch, or compares it with a value read off a tensor (``t.device.type``).
    """

    code = "CN103"
    name = "cuda-device-comparison"
    fixes = frozenset({Safety.SAFE, Safety.UNSAFE, Safety.DISPLAY_ONLY})
    triggers = ("cuda",)
    emits = ("torch.accelerator.current_accelerator",)
    VALID = (
        'assert impl in ["ref", "cuda"]\n',
        'if args.backend == "cuda":\n    pass\n',
        'if kernel == "cuda":\n    pass\n',
        'print("cuda" in message)\n',
        'if name.startswith("cuda"):\n    pass\n',
        'n = len("cuda")\n',
        # feeds fused=: False on Neuron is right (no fused Neuron kernel; CN6xx reports fused=)
        'use_fused = fused_available and device_type == "cuda"\n',
        'opt = torch.optim.AdamW(params, fused=device.type == "cuda")\n',
        'pin = x.device.type == "neuron"\n',
        "import torch\nis_acc = x.device.type == torch.accelerator.current_accelerator().type\n",
        'device = "cuda"\n',  # a placement: CN102
        # A test case's assertion on a name that does not say device.
        'class T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(impl, "cuda")\n',
        # The device a test wrote into its own config file, then reads back: the test's data.
        'def test_yaml_device(tmp_path):\n    (tmp_path / "c.yaml").write_text("model: hf\\ndevice: cuda:1\\n")\n'
        '    cfg = load(tmp_path / "c.yaml")\n    assert cfg.device == "cuda:1"\n',
        'from argparse import Namespace\n\nclass T(unittest.TestCase):\n    def test_cli(self):\n'
        '        args = Config.from_cli(Namespace(device="cuda"))\n        self.assertEqual(args.device, "cuda")\n',
    )
    INVALID = (
        Invalid('pin = x.device.type == "cuda"\n', 'pin = x.device.type == "neuron"\n'),
        Invalid('on_gpu = device == "cuda"\n', 'on_gpu = device == "neuron"\n'),
        Invalid('ok = "cuda:0" != args.device\n', 'ok = "neuron:0" != args.device\n'),
        Invalid('pin = "cuda" in device\n', 'pin = "neuron" in device\n'),
        # Lightning's connector: an element of a list of devices is a device.
        Invalid('on_gpu = strategy.parallel_devices[0].type == "cuda"\n', 'on_gpu = strategy.parallel_devices[0].type == "neuron"\n'),
        Invalid(
            'forks = [device] if getattr(device, "type", None) == "cuda" else []\n',
            'forks = [device] if getattr(device, "type", None) == "neuron" else []\n',
        ),
        # A helper named for what it returns: colossalai's get_current_device().
        Invalid(
            'dtype = "half" if get_current_device() == "cuda" else "float"\n',
            'dtype = "half" if get_current_device() == "neuron" else "float"\n',
        ),
        Invalid('is_gpu = str(x.device).startswith("cuda")\n', 'is_gpu = str(x.device).startswith("neuron")\n'),
        Invalid('gpu = device in ("cuda", "mps")\n', 'gpu = device in ("neuron", "mps")\n'),
        Invalid('index = int(device.replace("cuda:", ""))\n', 'index = int(device.replace("neuron:", ""))\n'),
        # What the test compares with is read off a torch device: a device test, though the test
        # also wrote the device into its parser.
        Invalid(
            'def test_cli():\n    args = parse(["--device", "cuda"])\n    assert run(args).device.type == "cuda"\n',
            'def test_cli():\n    args = parse(["--device", "cuda"])\n    assert run(args).device.type == "neuron"\n',
        ),
        # The parsed device places a tensor: a device test, though the test wrote the device itself.
        Invalid(
            'import torch\nfrom argparse import Namespace\n\ndef test_cli():\n'
            '    cfg = Config.from_cli(Namespace(device="cuda:1"))\n    assert cfg.device == "cuda:1"\n    torch.ones(1).to(cfg.device)\n',
            'import torch\nfrom argparse import Namespace\n\ndef test_cli():\n'
            '    cfg = Config.from_cli(Namespace(device="cuda:1"))\n    assert cfg.device == "neuron:1"\n    torch.ones(1).to(cfg.device)\n',
        ),
        # A test that runs only where CUDA is (lerobot's device override): its devices are real.
        Invalid(
            'import torch\n\ndef test_override():\n    if torch.cuda.is_available():\n'
            '        step = load(overrides={"device": "cuda:0"})\n        assert step.device == "cuda:0"\n',
            'import torch\n\ndef test_override():\n    if torch.cuda.is_available():\n'
            '        step = load(overrides={"device": "cuda:0"})\n        assert step.device == "neuron:0"\n',
        ),
        # A TestCase's assertion is the comparison spelled as a call.
        Invalid(
            'class T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(x.device.type, "cuda")\n',
            'class T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(x.device.type, "neuron")\n',
        ),
        Invalid(
            'class T(unittest.TestCase):\n    def test(self):\n        self.assertIn("cuda", str(y.device))\n',
            'class T(unittest.TestCase):\n    def test(self):\n        self.assertIn("neuron", str(y.device))\n',
        ),
        # The bare prefix is a device prefix on any receiver; both literals change together.
        Invalid(
            'if spec.startswith("cuda:"):\n    spec = spec[len("cuda:"):]\n',
            'if spec.startswith("neuron:"):\n    spec = spec[len("neuron:"):]\n',
        ),
        Invalid('spec = spec.removeprefix("cuda:")\n', 'spec = spec.removeprefix("neuron:")\n'),
        Invalid(
            "batch = [t.to(rank) if t.device.type != 'cuda' else t for t in batch]\n",
            "batch = [t.to(rank) if t.device.type != 'neuron' else t for t in batch]\n",
        ),
        # Alone, the test would pick the name "cuda" for a neuron device: it waits for CN102,
        # which moves the name with it (the engine holds a test whose selected literal stays).
        Invalid('device_type = "cuda" if "cuda" in device else "cpu"\n', None),
        Invalid("x = dict(pin_memory=device_type == 'cuda')\n", "x = dict(pin_memory=device_type == 'neuron')\n"),
        # A guard around torch-only code: usually right to retarget, but it changes control flow.
        Invalid(
            'import torch\nif x.device.type == "cuda":\n    torch.cuda.synchronize()\n',
            'import torch\nif x.device.type == "neuron":\n    torch.cuda.synchronize()\n',
            unsafe=True,
        ),
        # A guard around a project's CUDA kernel: its pure-PyTorch fallback is the port; advice only.
        Invalid('if x.device.type == "cuda":\n    y = fused_kernel(x)\n', None, unsafe=True),
        Invalid('y = fused(x) if x.device.type == "cuda" else slow(x)\n', None, unsafe=True),
        # A guard that only rejects the input is a check, as `assert device.type == "cuda"` is.
        Invalid(
            'if device.type != "cuda":\n    raise ValueError(f"expected CUDA, got {device}")\n',
            'if device.type != "neuron":\n    raise ValueError(f"expected CUDA, got {device}")\n',
        ),
        # A guard whose branches only move data is a data choice.
        Invalid(
            'if device_type == "cuda":\n    x = x.pin_memory().to(device, non_blocking=True)\nelse:\n    x = x.to(device)\n',
            'if device_type == "neuron":\n    x = x.pin_memory().to(device, non_blocking=True)\nelse:\n    x = x.to(device)\n',
        ),
        # The devices a Caffe2 net is built for (detectron2's export): Caffe2 has CPU and CUDA
        # devices only, so the test keeps admitting exactly those (reported, kept).
        Invalid(
            "from caffe2.python import core\n\n"
            "def output_devices(net, inputs):\n"
            "    def kind(t):\n"
            "        assert t.device.type in ['cpu', 'cuda']\n"
            "        return t.device.type\n"
            "    ssa, versions = core.get_ssa(net)\n"
            "    return [kind(t) for t in inputs], ssa\n",
            None,
        ),
        # The input check and the flag of a CUDA-only kernel keep their meaning (False on Neuron).
        Invalid(
            "import triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
            "def launch(x):\n    assert x.device.type == 'cuda', 'CUDA tensors only'\n    _k[(1,)](x)\n",
            None,
        ),
        Invalid(
            "from causal_conv1d import causal_conv1d_fn\n\ndef f(x, w):\n"
            "    use_kernel = x.device.type == 'cuda'\n"
            "    if use_kernel:\n        return causal_conv1d_fn(x, w)\n    return x\n",
            None,
            target="accelerator",
        ),
        Invalid(
            'import torch\npin = x.device.type == "cuda"\n',
            'import torch\npin = x.device.type == getattr(torch.accelerator.current_accelerator(), "type", "no accelerator")\n',
            target="accelerator",
        ),
        # The CPU of a machine without an accelerator must not pass the test: a string no
        # device type equals or contains stands in for the accelerator's type there.
        Invalid(
            "import torch\nok = 'cuda' in device\n",
            "import torch\nok = getattr(torch.accelerator.current_accelerator(), 'type', 'no accelerator') in device\n",
            target="accelerator",
        ),
        Invalid(
            'import torch\nsame = dev == f"cuda:{rank}"\n',
            """import torch\nsame = dev == f"{getattr(torch.accelerator.current_accelerator(), 'type', 'no accelerator')}:{rank}"\n""",
            target="accelerator",
        ),
    )

    @classmethod
    def detect(cls, file, settings: Settings) -> list[Finding] | None:  # noqa: ANN001 - python.AstFile
        """A gate: no finding where no "cuda" literal of the file is compared with a device (every
        report starts from ``find_use``'s COMPARISON; ``_Gate`` asks it on ``ast``); unsure
        wherever one is, or an f-string names CUDA (libcst runs). Most files CN103 wakes on spell
        "cuda" in a placement, a docstring or a message."""
        return None if _Gate(cls, file).reports() is None else []

    def __init__(self, context) -> None:  # noqa: ANN001
        super().__init__(context)
        # Per outermost function: does it name Caffe2? Keyed by id(), so the functions are kept
        # (a freed node's id may be reused by another).
        self._caffe2_functions: dict[int, bool] = {}
        self._kept: list[cst.FunctionDef] = []

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" not in node.value:  # cheap test before any walking
            return
        self._check(node, retarget_string)

    def _caffe2_devices(self) -> bool:
        """Is the visited test inside a function (the outermost ``def`` around it) that builds or
        runs a Caffe2 net, i.e. names something of ``caffe2``? Its device test is then the list
        of devices Caffe2 takes: detectron2's ``assert t.device.type in ["cpu", "cuda"]`` in a
        helper whose result picks ``caffe2_pb2.CUDA`` device options. A foreign runtime's device
        list is not Trainium's; "neuron" there admits tensors the net cannot hold."""
        if "caffe2" not in self.context.source:  # cheap: almost no module spells it
            return False
        outer = next((a for a in self.context.ancestors if isinstance(a, cst.FunctionDef)), None)
        if outer is None:
            return False
        known = self._caffe2_functions.get(id(outer))
        if known is None:
            known = any(
                (q := self.context.scope.qualify(dotted_name(n))) is not None and q.split(".")[0] == "caffe2"
                for n in m.findall(outer.body, m.Attribute(value=m.Name()))
            )
            self._caffe2_functions[id(outer)] = known
            self._kept.append(outer)
        return known

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        if not looks_like_cuda_fstring(node):
            return
        self._check(node, retarget_fstring)

    def _check(self, node: cst.BaseExpression, retarget) -> None:
        use = find_use(self, node)
        if use is None or use.kind is not UseKind.COMPARISON:
            return
        if is_test_data(self, node):
            return  # the test compares back a device it wrote into a parser or constructor itself
        # Retargeting would send neuron tensors into a CUDA-only kernel: the check must keep
        # failing (the dispatch keep taking its fallback) on Neuron until the kernel is ported.
        def describe(kernel: str) -> str:
            return f"`{self.context.code(use.user)}` checks a device against \"cuda\" in front of CUDA-only code: {kernel}"

        if report_kernel_gate(self, node, describe):
            return
        mixed = left_property(self, use.user)
        if mixed is not None:
            # On the GPU every answer of the property was "cuda"; on Trainium some become
            # "neuron" and the backend's name stays "cuda": neither test keeps every path.
            self.report(
                node,
                f"`{self.context.code(use.user)}` checks a device against \"cuda\": {mixed}",
                guidance='left as is: "neuron" here misses the answers that stay "cuda", and "cuda" misses those that '
                'become "neuron". Test both (`in ("cuda", "neuron")`), or make the property answer one device.',
                effort=Effort.MEDIUM,
            )
            return
        if self._caffe2_devices():
            self.report(
                node,
                f"`{self.context.code(use.user)}` checks a device against \"cuda\" for a Caffe2 net: left as is",
                guidance="Caffe2 runs on CPU and CUDA only and has no Neuron device: this test admits the devices "
                "the net built here can take. Run the Caffe2 export on CPU, or export with torch.export / ONNX.",
                effort=Effort.LOW,
            )
            return
        label = held_label(self, node)
        if label is not None:
            # Moved alone the test rejects the "cuda" its callers still hand it (CN109 leaves a
            # positional literal of unknown meaning), and the program's default path raises.
            self.report(
                node,
                f"`{self.context.code(use.user)}` checks a device against \"cuda\": left as is, {label}",
                guidance="The callers pass \"cuda\" as a slot's name: keep it on both sides, or change the test "
                "and every caller's word together.",
                effort=Effort.LOW,
            )
            return
        # A "cuda:" prefix parsed off a device string must match what its slice
        # (spec[len("cuda:"):], not a comparison) becomes: both take the device form.
        built = retarget(self, node, compared=not is_bare_prefix(node))
        if built is None:
            why = needs_newer_torch(self)
            if why is not None and comparison_safety(use, self) is not None:
                # No torch.accelerator to compare with: say so rather than go silent.
                self.report(
                    node,
                    f"`{self.context.code(use.user)}` checks a device against \"cuda\"",
                    guidance=why,
                    effort=Effort.LOW,
                    depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
                )
            return
        replacement, imports = built
        # Parsing a "cuda:" prefix off user input is string handling, not a CUDA code path; its
        # test and its slice (spec[len("cuda:"):]) must change together, so both are safe.
        safety = Safety.SAFE if is_bare_prefix(node) else comparison_safety(use, self)
        if safety is None:
            return
        self.report(
            node,
            f"`{self.context.code(use.user)}` checks a device against \"cuda\"",
            replacement=replacement,
            safety=safety,
            imports=imports,
            guidance="" if safety is Safety.SAFE else _GUIDANCE,
            effort={Safety.SAFE: Effort.NONE, Safety.UNSAFE: Effort.LOW}.get(safety, Effort.MEDIUM),
            description="test for the target device",
            depends=selected_code(self.context.ancestors, node), needs=opened_code(self.context.ancestors, node),
        )


class _Gate(AstDetector):
    """``CudaDeviceComparison.visit_SimpleString``'s first question on ``ast``: is the literal
    compared with a device? Unsure (``Unsure``) at the first that is."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        from cuda2neuron.python import Unsure

        if "cuda" in _strings_ast.literal_text(self.file, node) and _strings_ast.fstring_may_report(self.file, node):
            raise Unsure("an f-string that may name a CUDA device")

    def visit_Constant(self, node: ast.Constant) -> None:
        from cuda2neuron.python import Unsure

        if not isinstance(node.value, (str, bytes)) or self.ctx.fstrings:
            return
        if "cuda" not in _strings_ast.literal_text(self.file, node):
            return
        if not _strings_ast.simple_string(self.file, node):
            return  # an implicit concatenation's parts are never compared (ConcatenatedString)
        use = _strings_ast.find_use(self.ctx, node)
        if use is not None and use.kind is UseKind.COMPARISON:
            raise Unsure("a device compared with a CUDA literal")
