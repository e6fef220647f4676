"""Chains across modules that start at third-party CUDA-only packages and torch's CUDA-only calls
(issue 38), read with their fallbacks: ``workspace/_library_sinks.py`` and the sweep's
``_library_chains``.

A project function that uses bitsandbytes (flash_attn, xformers, ``torch.cuda.get_allocator_backend``)
on every path is CUDA-only, and a skip marker in another module in front of it must keep asking
about CUDA; one that uses it only where the fallback does not run on Trainium (``if bnb is not
None:``, ``if is_flash_attn_available():``, ``if x.is_cuda:``, a ``try`` body) is plain code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda2neuron.core import Config, ProjectFacts, RunOptions
from cuda2neuron.workspace import discover, process_files, project_facts, with_project_facts
from workspace_helpers import write_tree

BNB_TOP = "import bitsandbytes as bnb\n\n"
# An autograd Function whose forward runs a symmetric-memory op (CUDA-only in torch).
SYMM_LINEAR = (
    "import torch\n\n\nclass GatherLinear(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, w, group):\n"
    "        _, out = torch.ops.symm_mem.fused_all_gather_matmul(x, [w.T], 0, group)\n        return out[0]\n"
)
# A weight-sync group between a trainer and vLLM workers, on vLLM's NCCL communicator (the module
# imported inside the function, as RL trainers do to keep vLLM optional).
PYNCCL_GROUP = (
    "def make_group(host, port, rank, world, device):\n"
    "    from vllm.distributed.device_communicators.pynccl import PyNcclCommunicator\n"
    "    from vllm.distributed.utils import StatelessProcessGroup\n\n"
    "    pg = StatelessProcessGroup.create(host=host, port=port, rank=rank, world_size=world)\n"
    "    return PyNcclCommunicator(pg, device=device)\n"
)
BNB_GUARDED = "try:\n    import bitsandbytes as bnb\nexcept ImportError:\n    bnb = None\n\n"


# (files, {dotted name: text its sink must hold}, names that must reach nothing)
SWEEPS = [
    pytest.param(
        {"pkg/quant.py": BNB_TOP + "def quantize(w):\n    return bnb.functional.quantize_4bit(w)\n"},
        {"pkg.quant.quantize": "`bitsandbytes.functional.quantize_4bit` (a CUDA-only package) at pkg/quant.py:4"},
        (), id="unconditional-use-of-a-package",
    ),
    pytest.param(
        {"pkg/quant.py": BNB_GUARDED + "def quantize(w):\n    if bnb is not None:\n        return bnb.functional.quantize_4bit(w)\n    return w\n"},
        {}, ("pkg.quant.quantize",), id="use-behind-a-none-check-fallback",
    ),
    pytest.param(
        {"pkg/quant.py": BNB_GUARDED + "def quantize(w):\n    if bnb is None:\n        return w\n    else:\n        return bnb.functional.quantize_4bit(w)\n"},
        {}, ("pkg.quant.quantize",), id="use-in-the-else-of-a-none-check",
    ),
    pytest.param(
        {"pkg/attn.py": "from pkg.utils import is_flash_attn_available\nif is_flash_attn_available():\n    from flash_attn import flash_attn_func\n\n"
         "def attend(q, k, v):\n    if is_flash_attn_available():\n        return flash_attn_func(q, k, v)\n    return q\n"},
        {}, ("pkg.attn.attend",), id="use-behind-an-availability-probe",
    ),
    pytest.param(
        {"pkg/attn.py": "import torch\nfrom flash_attn import flash_attn_func\n\ndef attend(q, k, v):\n    if q.is_cuda:\n        return flash_attn_func(q, k, v)\n    return q\n"},
        {}, ("pkg.attn.attend",), id="use-behind-a-device-test",
    ),
    pytest.param(
        {"pkg/attn.py": "try:\n    import xformers.ops as xops\nexcept ImportError:\n    xops = None\n\n"
         "def attend(q, k, v):\n    try:\n        return xops.memory_efficient_attention(q, k, v)\n    except Exception:\n        return q\n"},
        {}, ("pkg.attn.attend",), id="use-in-a-try-body",
    ),
    pytest.param(
        {"pkg/quant.py": BNB_TOP + "import torch\n\ndef convert(model):\n    for name, child in model.named_children():\n"
         "        if isinstance(child, torch.nn.Linear):\n            setattr(model, name, bnb.nn.Linear8bitLt(1, 1))\n    return model\n"},
        {"pkg.quant.convert": "`bitsandbytes.nn.Linear8bitLt`"}, (), id="a-data-test-is-no-fallback",
    ),
    pytest.param(
        {"pkg/quant.py": BNB_TOP + "class QLinear(bnb.nn.Linear8bitLt):\n    pass\n\ndef quantize(m):\n    return QLinear(1, 1)\n",
         "pkg/model.py": "from pkg.quant import quantize\n\ndef build(m):\n    return quantize(m)\n"},
        {"pkg.quant.QLinear": "pkg/quant.py:3", "pkg.quant.quantize": "pkg/quant.py:3", "pkg.model.build": "pkg/quant.py:3"},
        (), id="a-base-class-then-the-same-module-then-another",
    ),
    pytest.param(
        {"pkg/quant.py": BNB_TOP + "def quantize(w):\n    return bnb.functional.quantize_4bit(w)\n",
         "pkg/model.py": "from pkg.quant import quantize\n\ndef build(w, fast):\n    if fast:\n        return quantize(w)\n    return w\n"},
        {}, ("pkg.model.build",), id="another-module-follows-unconditional-uses-only",
    ),
    pytest.param(
        {"pkg/alloc.py": "import os\n\ndef configure(conf):\n    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = conf\n    import torch\n"
         "    if not torch.cuda.is_available():\n        raise RuntimeError('no CUDA')\n    return torch.cuda.get_allocator_backend()\n"},
        {"pkg.alloc.configure": "`torch.cuda.get_allocator_backend`, which has no Neuron counterpart and raises without a CUDA device at pkg/alloc.py:8"},
        (), id="a-torch-cuda-only-call-after-an-early-raise",
    ),
    pytest.param(
        {"pkg/alloc.py": "import torch\n\ndef backend():\n    if torch.cuda.is_available():\n        return torch.cuda.get_allocator_backend()\n    return 'none'\n"},
        {}, ("pkg.alloc.backend",), id="a-torch-cuda-only-call-behind-its-test",
    ),
    pytest.param(
        {"pkg/linear.py": SYMM_LINEAR,
         "tests/test_linear.py": "import unittest\nimport torch\nfrom pkg.linear import GatherLinear\n\n"
         "@unittest.skipUnless(torch.cuda.is_available(), 'needs CUDA')\nclass TestGather(unittest.TestCase):\n"
         "    def test_forward(self):\n        GatherLinear.apply(torch.ones(2, 2), torch.ones(2, 2), 'tp')\n"},
        {"pkg.linear.GatherLinear": "`torch.ops.symm_mem.fused_all_gather_matmul` (a symmetric-memory op, registered for CUDA only) at pkg/linear.py:7",
         "tests.test_linear.TestGather": "pkg/linear.py:7"},
        (), id="a-symmetric-memory-op-reached-through-apply",
    ),
    pytest.param(
        {"pkg/buffers.py": "import torch\nimport torch.distributed._symmetric_memory as symm_mem\n\n"
         "def workspace(n, group):\n    buf = symm_mem.empty(n, device='cuda')\n    symm_mem.rendezvous(buf, group)\n    return buf\n\n"
         "def fake(groups):\n    with symm_mem._test_mode(groups):\n        return symm_mem.is_nvshmem_available()\n"},
        {"pkg.buffers.workspace": "`torch.distributed._symmetric_memory.empty` (symmetric memory: NVSHMEM, CUDA or NCCL buffers on CUDA streams) at pkg/buffers.py:5"},
        ("pkg.buffers.fake",), id="symmetric-memory-buffers-but-not-its-device-free-helpers",
    ),
    pytest.param(
        {"pkg/mode.py": "from torch.distributed._symmetric_memory import _test_mode, enable_symm_mem_for_group\n\n"
         "def fake(groups, name):\n    enable_symm_mem_for_group(name)\n    return _test_mode(groups)\n"},
        {}, ("pkg.mode.fake",), id="symmetric-memory-test-mode-imported-by-name",
    ),
    pytest.param(
        {"pkg/clip.py": "try:\n    from apex.multi_tensor_apply import multi_tensor_applier\nexcept ImportError:\n"
         "    from pkg.local import local_applier\n\n    multi_tensor_applier = local_applier\n\n"
         "def clip(grads):\n    return multi_tensor_applier(grads)\n"},
        {}, ("pkg.clip.clip",), id="a-binding-with-a-portable-fallback-assigned",
    ),
    pytest.param(
        {"pkg/clip.py": "try:\n    from apex.multi_tensor_apply import multi_tensor_applier\nexcept ImportError:\n"
         "    from pkg.local import multi_tensor_applier\n\ndef clip(grads):\n    return multi_tensor_applier(grads)\n"},
        {}, ("pkg.clip.clip",), id="a-binding-with-a-portable-fallback-imported",
    ),
    pytest.param(
        {"pkg/clip.py": "try:\n    from apex.multi_tensor_apply import multi_tensor_applier\nexcept ImportError:\n"
         "    multi_tensor_applier = None\n\ndef clip(grads):\n    return run(\n        multi_tensor_applier=multi_tensor_applier,\n    )\n\n"
         "def run(multi_tensor_applier):\n    return multi_tensor_applier(1)\n\n"
         "def scale(grads):\n    return multi_tensor_applier(grads)\n"},
        {"pkg.clip.scale": "`apex.multi_tensor_apply.multi_tensor_applier`"}, (),
        id="none-or-a-keyword-argument-is-no-fallback",
    ),
    pytest.param(
        {"pkg/ext.py": "from unittest.mock import MagicMock\n\ntry:\n    import transformer_engine as te\nexcept ImportError:\n"
         "    te = MagicMock()\n\nclass Tracker(te.pytorch.distributed.CudaRNGStatesTracker):\n    pass\n"},
        {"pkg.ext.Tracker": "`transformer_engine.pytorch.distributed.CudaRNGStatesTracker`"}, (),
        id="a-placeholder-is-no-fallback",
    ),
    pytest.param(
        {"mamba_ssm/ops.py": "def scan(x):\n    return x\n", "mamba_ssm/model.py": "import mamba_ssm.ops\n\ndef run(x):\n    return mamba_ssm.ops.scan(x)\n"},
        {}, ("mamba_ssm.model.run",), id="the-project-is-the-package",
    ),
    # mmcv's deformable convolutions are compiled for CUDA and CPU tensors and have no torch
    # fallback inside: a layer built from one reaches no implementation on the neuron device.
    pytest.param(
        {"pkg/align.py": "import torch.nn as nn\nfrom mmcv.ops import ModulatedDeformConv2d\n\n\nclass Align(nn.Module):\n"
         "    def __init__(self, c):\n        super().__init__()\n        self.dcn = ModulatedDeformConv2d(c, c, 3, padding=1)\n"},
        {"pkg.align.Align": "`mmcv.ops.ModulatedDeformConv2d`"}, (), id="a-layer-built-from-mmcv-deformable-convolution",
    ),
    pytest.param(
        {"pkg/align.py": "from mmcv.ops.deform_conv import DeformConv2dPack\n\n\ndef build(c):\n    return DeformConv2dPack(c, c, 3)\n"},
        {"pkg.align.build": "`mmcv.ops.deform_conv.DeformConv2dPack`"}, (), id="mmcv-deformable-convolution-from-its-module",
    ),
    pytest.param(
        {"pkg/blur.py": "from mmcv.ops import upfirdn2d\n\n\ndef blur(x, k):\n    return upfirdn2d(x, k, padding=1)\n"},
        {}, ("pkg.blur.blur",), id="an-mmcv-op-with-a-torch-fallback-is-plain",
    ),
    pytest.param(
        {"pkg/editors/__init__.py": "from .align import Align\n\n__all__ = ['Align']\n",
         "pkg/editors/align.py": "from mmcv.ops import DeformConv2dPack\n\n\nclass Align:\n    def __init__(self, c):\n        self.dcn = DeformConv2dPack(c, c, 3)\n",
         "tests/test_align.py": "from pkg.editors import Align\n\n\ndef test_align():\n    assert Align(4)\n"},
        {"pkg.editors.Align": "`mmcv.ops.DeformConv2dPack`", "tests.test_align.test_align": "`mmcv.ops.DeformConv2dPack`"}, (),
        id="a-name-a-package-init-hands-on",
    ),
    pytest.param(
        {"pkg/comm.py": PYNCCL_GROUP},
        {"pkg.comm.make_group": "`vllm.distributed.device_communicators.pynccl.PyNcclCommunicator`"}, (),
        id="a-function-building-vllms-nccl-communicator",
    ),
]


@pytest.mark.parametrize(("files", "sinks", "plain"), SWEEPS)
def test_chains_start_at_third_party_cuda_only_code(tmp_path, files, sinks, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    for name, text in sinks.items():
        found = facts.sink(name)
        assert found is not None and text in found, (name, found)
    for name in plain:
        assert facts.sink(name) is None, (name, facts.sink(name))


ALLOCATOR_PROJECT = {
    "app/alloc.py": (
        "import os\n\n\ndef configure(conf):\n    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = conf\n    import torch\n\n"
        "    if not torch.cuda.is_available():\n        raise RuntimeError('no CUDA')\n"
        "    return torch.cuda.get_allocator_backend()\n"
    ),
    "tests/test_alloc.py": (
        "import pytest\nimport torch\n\n\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')\n"
        "def test_backend_is_reported():\n    assert torch.cuda.get_allocator_backend() in ('native', 'cudaMallocAsync')\n\n\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')\n"
        "def test_configure():\n    from app.alloc import configure\n\n    assert configure('backend:native')\n\n\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')\n"
        "def test_plain():\n    assert torch.ones(2).sum() == 2\n"
    ),
}


@pytest.fixture(scope="module")
def allocator_port(tmp_path_factory) -> tuple[str, list]:
    root = write_tree(tmp_path_factory.mktemp("alloc") / "proj", ALLOCATOR_PROJECT)
    found = discover([root])
    config = with_project_facts(Config(), found.files)
    results = process_files(found.files, config, RunOptions(fix=True), jobs=1)
    [result] = [r for r in results if r.path.endswith("test_alloc.py")]
    return (result.new_bytes or Path(result.path).read_bytes()).decode(), list(result.findings)


# (test function, whether its skip marker must keep asking about CUDA)
MARKERS = [
    pytest.param("test_backend_is_reported", True, id="a-test-calling-the-cuda-allocator"),
    pytest.param("test_configure", True, id="a-test-of-a-project-function-that-calls-it"),
    pytest.param("test_plain", False, id="a-plain-test-is-ported"),
]


@pytest.mark.parametrize(("test", "kept"), MARKERS)
def test_skip_markers_of_cuda_allocator_tests_keep_skipping(allocator_port, test, kept):
    text, findings = allocator_port
    marker = text[: text.index(f"def {test}")].rstrip().splitlines()[-1]
    assert ("torch.cuda.is_available()" in marker) is kept, marker
    if kept:
        line = text[: text.index(f"def {test}")].count("\n")
        [held] = [f for f in findings if f.code == "CN201" and f.span.start_line == line]
        assert "get_allocator_backend" in held.message and not held.applied


DCN_PROJECT = {
    "vsr/__init__.py": "",
    "vsr/align.py": (
        "import torch.nn as nn\nfrom mmcv.ops import ModulatedDeformConv2d\n\n\n"
        "class Align(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n"
        "        self.dcn = ModulatedDeformConv2d(c, c, 3, padding=1)\n\n"
        "    def forward(self, x, offset, mask):\n        return self.dcn(x, offset, mask)\n\n\n"
        "class Fuse(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.conv = nn.Conv2d(c, c, 1)\n\n"
        "    def forward(self, x):\n        return self.conv(x)\n"
    ),
    "tests/test_align.py": (
        "import pytest\nimport torch\n\nfrom vsr.align import Align, Fuse\n\n\n"
        "def test_align_guarded():\n    if torch.cuda.is_available():\n        model = Align(4).cuda()\n"
        "        assert model is not None\n\n\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')\n"
        "def test_align_marked():\n    assert Align(4).cuda() is not None\n\n\n"
        "def test_fuse_guarded():\n    if torch.cuda.is_available():\n        model = Fuse(4).cuda()\n"
        "        assert model is not None\n"
    ),
}


@pytest.fixture(scope="module")
def dcn_port(tmp_path_factory) -> tuple[str, list]:
    root = write_tree(tmp_path_factory.mktemp("dcn") / "proj", DCN_PROJECT)
    found = discover([root])
    config = with_project_facts(Config(), found.files)
    results = process_files(found.files, config, RunOptions(fix=True), jobs=1)
    [result] = [r for r in results if r.path.endswith("test_align.py")]
    return (result.new_bytes or Path(result.path).read_bytes()).decode(), list(result.findings)


# (test function, whether its guard must keep asking about CUDA): mmagic's EDVR, TDAN and
# BasicVSR++ tests run their deformable-convolution models under `if torch.cuda.is_available()`;
# moved, they ran on Trainium into mmcv's op, which has no neuron implementation.
DCN_GUARDS = [
    pytest.param("test_align_guarded", True, id="a-guard-in-front-of-an-mmcv-deformable-layer"),
    pytest.param("test_align_marked", True, id="a-skip-marker-of-a-test-of-that-layer"),
    pytest.param("test_fuse_guarded", False, id="a-plain-layer-beside-it-is-ported"),
]


@pytest.mark.parametrize(("test", "kept"), DCN_GUARDS)
def test_guards_of_mmcv_deformable_layers_keep_asking_about_cuda(dcn_port, test, kept):
    text, findings = dcn_port
    start = text.index(f"def {test}")
    body = text[start: text.find("\n\n\n", start) if "\n\n\n" in text[start:] else len(text)]
    around = text[:start].rstrip().splitlines()[-1] + "\n" + body
    assert ("torch.cuda.is_available()" in around) is kept, around
    if kept:
        held = [f for f in findings if f.code == "CN201" and not f.applied and "ModulatedDeformConv2d" in f.message]
        assert held, findings


def test_a_device_handed_to_a_function_building_vllms_communicator_stays(tmp_path):
    # OpenRLHF's actor handed `torch.cuda.current_device()` to its own `stateless_init_process_group`,
    # which builds vLLM's PyNcclCommunicator on it; the tensor's device beside it is ported.
    files = {
        "rl/__init__.py": "",
        "rl/comm.py": PYNCCL_GROUP,
        "rl/actor.py": (
            "import torch\n\nfrom rl.comm import make_group\n\n\nclass Actor:\n"
            "    def setup(self, host, port, world):\n"
            "        self.group = make_group(host, port, 0, world, torch.cuda.current_device())\n"
            "        return torch.zeros(2, device=torch.cuda.current_device())\n"
        ),
    }
    root = write_tree(tmp_path / "proj", files)
    found = discover([root])
    config = with_project_facts(Config(), found.files)
    [result] = [r for r in process_files(found.files, config, RunOptions(fix=True), jobs=1) if r.path.endswith("actor.py")]
    text = (result.new_bytes or Path(result.path).read_bytes()).decode()
    assert "make_group(host, port, 0, world, torch.cuda.current_device())" in text, text
    assert "torch.zeros(2, device=torch.cuda.current_device())" not in text, text


def test_the_sweep_reads_no_rule_table_for_files_no_rule_wakes(tmp_path):
    # A project of plain files: no pattern is built, nothing is parsed, nothing is recorded.
    root = write_tree(tmp_path / "proj", {f"pkg/m{i}.py": "import os\nx = os.sep\n" for i in range(3)})
    assert project_facts(discover([root]).files).sink_names == frozenset()


# (dotted name, extension modules, kernel modules, whether it is the extension)
EXTENSIONS = [
    pytest.param("upfirdn2d", {"upfirdn2d"}, {"pkg.ops.upfirdn2d.upfirdn2d"}, True, id="the-extension-itself"),
    pytest.param("pkg.ops.upfirdn2d.upfirdn2d", {"upfirdn2d"}, {"pkg.ops.upfirdn2d.upfirdn2d"}, False, id="the-python-module-of-that-name"),
    pytest.param("pkg.ops.upfirdn2d.upfirdn2d.upfirdn2d", {"upfirdn2d"}, {"pkg.ops.upfirdn2d.upfirdn2d"}, False, id="a-function-of-that-module"),
    pytest.param("ops.upfirdn2d.upfirdn2d.upfirdn2d", {"upfirdn2d"}, {"pkg.ops.upfirdn2d.upfirdn2d"}, False, id="a-relative-tail"),
    pytest.param("work.repos.pkg.ops.upfirdn2d.upfirdn2d.upfirdn2d", {"upfirdn2d"}, {"pkg.ops.upfirdn2d.upfirdn2d"}, False, id="a-path-long-spelling"),
    pytest.param("other.fused_adam_cuda", {"fused_adam_cuda"}, set(), True, id="found-under-another-root"),
]


@pytest.mark.parametrize(("dotted", "extensions", "kernels", "expected"), EXTENSIONS)
def test_a_python_module_named_like_an_extension_is_not_it(dotted, extensions, kernels, expected):
    facts = ProjectFacts(extension_modules=frozenset(extensions), kernel_modules=frozenset(kernels))
    assert facts.builds_extension(dotted) is expected
