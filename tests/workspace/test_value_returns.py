"""Device facts that cross a call through a return (issue 38): the sweep's ``device_returns``, and
the return that keeps its meaning where a caller tests its answer in front of CUDA code the port
leaves.

mmengine's ``is_cuda_available()`` returned ``torch.neuron.is_available()`` after the port, and
``AmpOptimWrapper``'s ``assert is_cuda_available() or ...`` then admitted a
``torch.cuda.amp.GradScaler`` that CN304 leaves to a person: the port reached CUDA code on
Trainium. The fixture project ``value_returns`` carries that case and an early exit's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from cuda2neuron.workspace import discover, project_facts
from workspace_helpers import port_both, write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "value_returns"

PROBE = "import torch\n\ndef ready():\n    return torch.cuda.is_available()\n"
SCALER = (
    "import torch\nfrom pkg.probe import ready\n\nif hasattr(torch, 'npu'):\n    from torch.npu.amp import GradScaler\n"
    "else:\n    from torch.cuda.amp import GradScaler\n\ndef build():\n    assert ready(), 'gpu only'\n    return GradScaler()\n"
)
KERNEL = (
    "import triton\nimport triton.language as tl\n\n@triton.jit\ndef _k(x):\n    pass\n\n"
    "def fused(x):\n    _k[(1,)](x)\n    return x\n"
)

# (files, functions recorded, functions not recorded)
RETURNS = [
    pytest.param({"pkg/probe.py": PROBE, "pkg/scale.py": SCALER}, ["pkg.probe.ready"], (), id="an-assert-admits-a-conditional-import"),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom .probe import ready\n\ndef sync():\n    if not ready():\n        return\n    torch.cuda.set_sync_debug_mode(1)\n"},
        ["pkg.probe.ready"], (), id="an-early-exit-under-not-opens-what-follows",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE.replace("is_available()", "device_count()"), "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef free():\n    if ready() > 1:\n        torch.cuda.set_sync_debug_mode(1)\n"},
        ["pkg.probe.ready"], (), id="a-count-compared",
    ),
    pytest.param(
        {"pkg/__init__.py": "from .probe import ready\n", "pkg/probe.py": PROBE, "pkg/ops.py": KERNEL,
         "pkg/use.py": "from pkg import ready\nfrom pkg.ops import fused\n\ndef run(x):\n    return fused(x) if ready() else x\n"},
        ["pkg.probe.ready"], (), id="a-package-re-export-in-front-of-a-triton-kernel",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef free():\n    if ready():\n        torch.cuda.empty_cache()\n"},
        [], ("pkg.probe.ready",), id="only-code-that-moves-is-guarded",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/hook.py": "import torch\nfrom pkg.probe import ready\n\ndef sync():\n    if not ready():\n        torch.cuda.set_sync_debug_mode(1)\n"},
        [], ("pkg.probe.ready",), id="the-else-of-a-negated-test-is-not-opened",
    ),
    pytest.param(
        {"pkg/probe.py": "import torch\n\nclass P:\n    def ready(self):\n        return torch.cuda.is_available()\n",
         "pkg/hook.py": "import torch\nfrom pkg.probe import P\n\ndef sync():\n    if P().ready():\n        torch.cuda.set_sync_debug_mode(1)\n"},
        [], ("pkg.probe.P.ready",), id="a-method-is-not-followed",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/arch.py": "import os\nfrom pkg.probe import ready\n\ndef arch():\n    on = ready()\n    if not on:\n        os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n    return on\n"},
        ["pkg.probe.ready"], (), id="asked-by-a-function-that-sets-the-cuda-arch-list",
    ),
    pytest.param(
        {"pkg/probe.py": PROBE, "pkg/arch.py": "import os\nfrom pkg.probe import ready\n\ndef arch():\n    on = ready()\n    os.environ['OMP_NUM_THREADS'] = '4'\n    return on\n"},
        [], ("pkg.probe.ready",), id="another-setting-is-no-cuda-build",
    ),
]


@pytest.mark.parametrize(("files", "expected", "plain"), RETURNS)
def test_the_sweep_records_a_return_whose_answer_fronts_cuda_code(tmp_path, files, expected, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    found = {name for name, _, _ in facts.device_returns}
    assert set(expected) <= found, facts.device_returns
    assert not found & set(plain), facts.device_returns




@pytest.fixture(scope="module")
def ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return port_both(PROJECT)


# (file, the function, what the port has on its last line in both runs, text the held finding's
#  message holds)
LINES = [
    pytest.param("retlib/devices.py", "cuda_ready", "torch.cuda.is_available()",
                 ("retlib/scaling.py:17", "retlib/scaling.py:15", "`cuda_ready()`"), id="the-assert-s-probe-keeps-its-meaning"),
    pytest.param("retlib/devices.py", "sync_ready", "torch.cuda.is_available()",
                 ("retlib/hooks.py:16", "retlib/hooks.py:14", "`sync_ready()`"), id="the-early-exit-s-probe-keeps-its-meaning"),
    pytest.param("retlib/devices.py", "gpu_count", "torch.neuron.device_count()", None, id="a-probe-in-front-of-moved-code-is-ported"),
    pytest.param("retlib/build.py", "have_gpu", "torch.cuda.is_available()",
                 ("retlib/build.py:13", "retlib/build.py:17", "`TORCH_CUDA_ARCH_LIST`"), id="the-cuda-build-s-probe-keeps-its-meaning"),
    pytest.param("retlib/hooks.py", "free_cache", "torch.neuron.empty_cache()", None, id="the-moved-code"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "function", "wanted", "where"), LINES)
def test_a_return_moves_only_where_its_guards_open_no_cuda_code(ports, unsafe, path, function, wanted, where):
    node = next(n for n in ast.parse((PROJECT / path).read_text()).body if getattr(n, "name", None) == function)
    line = node.end_lineno
    text, findings = ports[unsafe][path]
    assert wanted in text.splitlines()[line - 1], text.splitlines()[line - 1]
    if where is not None:
        held = [f for f in findings if f.span.start_line == line and not f.applied]
        assert held and all(w in held[0].message for w in where), [(f.code, f.span.start_line, f.message) for f in findings]


# --- device values handed back: an option's device built and returned to a test -----------------

PLACE = "import torch\n\ndef init_device(args):\n    device = torch.device(args.device)\n    return device\n"
OPTION = "import argparse\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--device', default='cuda')\n"
CALLER = OPTION + "\ndef main(step):\n    args = parser.parse_args()\n    device = {call}\n    if {test}:\n        {body}\n"

# (files, (caller module, attribute, moved by --unsafe-fixes) recorded)
HANDED_BACK = [
    pytest.param(
        {"pkg/place.py": PLACE, "pkg/train.py": "from pkg.place import init_device\n" + CALLER.format(
            call="init_device(args)", test="device.type in ('cuda',)", body="step.scaler = Scaler()")},
        {("pkg.train", "device", False)}, id="a-branch-that-builds-a-class-stays-in-every-run",
    ),
    pytest.param(
        {"pkg/place.py": PLACE, "pkg/train.py": "import torch\nfrom pkg.place import init_device\n" + CALLER.format(
            call="init_device(args)", test="device.type == 'cuda'", body="torch.cuda.synchronize()")},
        {("pkg.train", "device", True)}, id="a-torch-only-branch-moves-with-unsafe-fixes",
    ),
    pytest.param(
        {"pkg/__init__.py": "", "pkg/utils/__init__.py": "from .place import init_device\n", "pkg/utils/place.py": PLACE,
         "pkg/train.py": "from pkg import utils\n" + CALLER.format(
             call="utils.init_device(args)", test="'cuda' in str(device) and step", body="step.scaler = Scaler()")},
        {("pkg.train", "device", False)}, id="through-a-package-re-export-and-str",
    ),
    pytest.param(
        {"pkg/place.py": "import torch\n\ndef init_run(opts, rank=0):\n    return rank, torch.device(getattr(opts, 'device', 'cuda'))\n",
         "pkg/train.py": "from pkg.place import init_run\n" + CALLER.format(
             call="init_run(args)", test="not device.type.startswith('cuda')", body="step.fallback()").replace(
             "    device = init_run(args)", "    rank, device = init_run(args)")},
        {("pkg.train", "device", False)}, id="one-element-of-a-returned-tuple-through-getattr",
    ),
    pytest.param(
        {"pkg/train.py": "import torch\n" + CALLER.format(call="init_device(args)", test="device.type == 'cuda'", body="step.scaler = Scaler()")
         + "\n\n" + PLACE.replace("import torch\n\n", "")},
        {("pkg.train", "device", False)}, id="defined-below-its-caller-in-one-module",
    ),
    pytest.param(
        {"pkg/place.py": PLACE, "pkg/train.py": "from pkg.place import init_device\n" + CALLER.format(
            call="init_device(args)", test="device.type == 'cuda'", body="pin = True")},
        set(), id="a-branch-of-data-moves-with-the-default",
    ),
    pytest.param(
        {"pkg/place.py": PLACE, "pkg/train.py": "from pkg.place import init_device\n" + CALLER.format(
            call="init_device(args)", test="device.type == 'cuda'", body="step.scaler = Scaler()").replace(
            "device = init_device(args)", "device = init_device(args)\n    rank = init_device(args)").replace("device.type", "rank.type")},
        {("pkg.train", "device", False)}, id="any-name-bound-to-the-answer",
    ),
    pytest.param(
        {"pkg/place.py": PLACE.replace("torch.device(args.device)", "torch.device('cpu')"), "pkg/train.py": "from pkg.place import init_device\n"
         + CALLER.format(call="init_device(args)", test="device.type == 'cuda'", body="step.scaler = Scaler()")},
        set(), id="a-device-not-built-from-the-namespace",
    ),
    pytest.param(
        {"pkg/place.py": PLACE.replace("return device", "device = torch.device('cpu')\n    return device"),
         "pkg/train.py": "from pkg.place import init_device\n" + CALLER.format(
             call="init_device(args)", test="device.type == 'cuda'", body="step.scaler = Scaler()")},
        set(), id="a-name-bound-twice-is-not-followed",
    ),
]


@pytest.mark.parametrize(("files", "expected"), HANDED_BACK)
def test_the_sweep_records_an_option_whose_returned_device_a_caller_tests(tmp_path, files, expected):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    assert {(module, attribute, unsafe) for module, attribute, _, unsafe in facts.returned_options} == expected


# (file, the option's line, its text after the safe run, after --unsafe-fixes, text the held finding's message holds)
OPTIONS = [
    pytest.param("retlib/train_amp.py", 11, 'default="cuda"', 'default="cuda"',
                 ("retlib/train_amp.py:21", "`place_run()`", "retlib/placement.py:9"), id="a-test-in-front-of-a-class-holds-it"),
    pytest.param("retlib/bench_sync.py", 11, 'default="cuda", choices=["cuda", "cpu"]', 'default="neuron", choices=["neuron", "cpu"]',
                 ("retlib/bench_sync.py:19", "`init_run()`", "retlib/placement.py:14"), id="a-torch-only-test-moves-with-unsafe-fixes"),
    pytest.param("retlib/pinned.py", 10, 'default="neuron"', 'default="neuron"', None, id="a-test-that-picks-data-moves-with-it"),
]


@pytest.mark.parametrize(("path", "line", "safe", "unsafe", "where"), OPTIONS)
def test_an_option_moves_with_the_test_on_the_device_returned_from_it(ports, path, line, safe, unsafe, where):
    for run, wanted in ((False, safe), (True, unsafe)):
        text, findings = ports[run][path]
        assert wanted in text.splitlines()[line - 1], (run, text.splitlines()[line - 1])
    if where is not None:
        held = [f for f in ports[False][path][1] if f.span.start_line == line and not f.applied]
        assert held and all(w in held[0].message for w in where), [(f.code, f.span.start_line, f.message) for f in ports[False][path][1]]


# --- a property that may still answer "cuda": a name given to a base, returned beside devices ----

BASE = "class Backend:\n    def __init__(self, name):\n        self._name = name\n\n    @property\n    def name(self):\n        return self._name\n"
GPU = "from pkg.base import Backend\n\nclass Gpu(Backend):\n    def __init__(self):\n        super().__init__({keyword}='cuda')\n\ndef current():\n    return Gpu()\n"
BLOCK = (
    "from pkg.gpu import current\n\nclass Block:\n    def __init__(self, buf=None):\n        self.buf = buf\n\n"
    "    {decorator}\n    def device_type(self):\n        if self.buf is not None:\n            return self.buf.device.type\n"
    "        return current().{attribute}\n"
)

# (files, the properties recorded)
PROPERTIES = [
    pytest.param({"pkg/base.py": BASE, "pkg/gpu.py": GPU.format(keyword="name"), "pkg/block.py": BLOCK.format(decorator="@property", attribute="name")},
                 {"device_type"}, id="a-name-given-to-the-base-and-returned"),
    pytest.param({"pkg/base.py": BASE.replace("name", "device"), "pkg/gpu.py": GPU.format(keyword="device"),
                  "pkg/block.py": BLOCK.format(decorator="@property", attribute="device")},
                 set(), id="a-device-keyword-moves-with-the-port"),
    pytest.param({"pkg/base.py": BASE, "pkg/gpu.py": GPU.format(keyword="name"), "pkg/block.py": BLOCK.format(decorator="@staticmethod", attribute="name")},
                 set(), id="only-a-property"),
    pytest.param({"pkg/base.py": BASE, "pkg/gpu.py": GPU.format(keyword="name"), "pkg/block.py": BLOCK.format(decorator="@property", attribute="label")},
                 set(), id="another-attribute-returned"),
]


@pytest.mark.parametrize(("files", "expected"), PROPERTIES)
def test_the_sweep_records_a_property_that_returns_a_name_left_cuda(tmp_path, files, expected):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    assert {name for name, _, _ in facts.left_cuda_properties} == expected


# (the test's line in retlib/offload.py, its text after both runs, text the held finding's message holds)
PROPERTY_TESTS = [
    pytest.param(7, 'block.device_type == "cuda"', ("retlib/blocks.py:16", "retlib/backends.py:16"), id="the-property-s-test-is-left-to-a-person"),
    pytest.param(15, 'block.buffer.device.type == "neuron"', None, id="a-tensor-s-device-moves"),
]


@pytest.mark.parametrize(("line", "wanted", "where"), PROPERTY_TESTS)
def test_a_test_of_a_property_that_may_stay_cuda_does_not_move(ports, line, wanted, where):
    for run in (False, True):
        text, findings = ports[run]["retlib/offload.py"]
        assert wanted in text.splitlines()[line - 1], (run, text.splitlines()[line - 1])
    if where is not None:
        held = [f for f in ports[False]["retlib/offload.py"][1] if f.span.start_line == line and not f.applied]
        assert held and all(w in held[0].message for w in where), [(f.code, f.span.start_line, f.message) for f in held]
