"""CUDA-only code reached through other modules (issue 38): the sweep's ``sink_names`` and what
the per-file rules make of them.

A device test in one module in front of a class whose method calls another module's Triton
kernel is a kernel gate, as it is when the launch sits in the same file: kept CUDA, reported
with the sink and the line where the chain enters it. The fixture project ``block_kernels``
carries the program (a package of three modules, checks, a training script).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda2neuron.core import Config, RunOptions
from cuda2neuron.workspace import ResultCache, discover, process_files, project_facts, with_project_facts
from workspace_helpers import write_tree

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "block_kernels"

KERNEL = """\
import torch
import triton

@triton.jit
def _k(x_ptr):
    pass

def fused(x):
    _k[(1,)](x)
    return x
"""

PLAIN = "import torch\n\ndef fused(x):\n    return x * 1.0\n"


# (files, {dotted name: the text its sink must hold}, names that must reach nothing)
SWEEPS = [
    pytest.param(
        {"pkg/ops.py": KERNEL, "pkg/model.py": "from .ops import fused\n\nclass Block:\n    def forward(self, x):\n        return fused(x)\n"},
        {"pkg.model.Block": "`pkg.ops.fused` (project code that runs GPU kernels) at pkg/model.py:5"},
        (), id="class-calls-a-relative-kernel-import",
    ),
    pytest.param(
        {
            "pkg/ops.py": KERNEL,
            "pkg/layers.py": "from pkg.ops import fused\n\ndef norm(x):\n    return fused(x)\n",
            "pkg/model.py": "from pkg.layers import norm\n\nclass Net:\n    def forward(self, x):\n        return norm(x)\n",
            "train.py": "from pkg.model import Net\n\ndef run(x):\n    return Net().forward(x)\n",
        },
        {"pkg.model.Net": "at pkg/layers.py:4", "train.run": "at pkg/layers.py:4"},
        (), id="a-chain-of-modules-names-where-it-enters-the-kernel",
    ),
    pytest.param(
        {
            "pkg/ops.py": KERNEL,
            "pkg/model.py": "from .ops import fused\n\nclass Block:\n    def forward(self, x):\n        return fused(x)\n",
            "pkg/__init__.py": "from .model import Block\n",
        },
        {"pkg.Block": "at pkg/model.py:5"},
        (), id="a-package-re-export",
    ),
    pytest.param(
        {
            "pkg/ops.py": KERNEL,
            "pkg/timing.py": (
                "from .ops import fused\n\nHAVE_TRITON = True\n\n"
                "def dtw(x):\n    if x.is_cuda:\n        return fused(x)\n    return x\n\n"
                "def pick(x):\n    return fused(x) if x.device.type == 'cuda' and x.numel() else x\n\n"
                "def gated(x):\n    if HAVE_TRITON:\n        return fused(x)\n    return x\n\n"
                "def either(x):\n    if x.is_cuda or x.is_neuron:\n        return fused(x)\n    return x\n"
            ),
        },
        {"pkg.timing.gated": "at pkg/timing.py:15", "pkg.timing.either": "at pkg/timing.py:20"},
        ("pkg.timing.dtw", "pkg.timing.pick"), id="a-kernel-behind-a-cuda-test-is-not-reached-on-trainium",
    ),
    pytest.param(
        {"pkg/ops.py": KERNEL, "pkg/model.py": "import pkg.ops\n\ndef norm(x):\n    return pkg.ops.fused(x)\n"},
        {"pkg.model.norm": "at pkg/model.py:4"},
        (), id="a-dotted-module-import",
    ),
    pytest.param(
        {
            "pkg/ops.py": KERNEL,
            "pkg/model.py": "from .ops import fused\n\nclass Block:\n    def forward(self, x):\n        return fused(x)\n\nclass Head:\n    def forward(self, x):\n        return x\n",
        },
        {}, ("pkg.model.Head",), id="a-plain-class-beside-reaches-nothing",
    ),
    pytest.param(
        {
            "pkg/ext.py": 'from torch.utils.cpp_extension import load_inline\n\n_ext = load_inline(name="fused_ext", cpp_sources="", cuda_sources="__global__ void k() {}")\n\ndef fused(x):\n    return _ext.fused(x)\n',
            "pkg/layer.py": "from .ext import fused\n\nclass Layer:\n    def forward(self, x):\n        return fused(x)\n",
        },
        {"pkg.layer.Layer": "the CUDA extension `_ext` (built at run time by load_inline) at pkg/ext.py:3", "pkg.ext.fused": "pkg/ext.py:3"},
        (), id="an-extension-built-at-run-time-from-cuda",
    ),
    pytest.param(
        {"pkg/ops.py": PLAIN, "pkg/model.py": "from .ops import fused\n\nclass Block:\n    def forward(self, x):\n        return fused(x)\n"},
        {}, ("pkg.model.Block",), id="no-kernel-in-the-project",
    ),
    # Megatron-LM's moe_layer.py probes Triton to set a flag and launches nothing: its classes
    # are plain code, and so is what reaches them; a module that uses what it imports is not.
    pytest.param(
        {
            "pkg/moe.py": "try:\n    import triton  # noqa: F401\n\n    HAVE_TRITON = True\nexcept ImportError:\n    HAVE_TRITON = False\n\n\nclass Layer:\n    def forward(self, x):\n        return x\n",
            "pkg/model.py": "from .moe import Layer\n\nclass Net:\n    def forward(self, x):\n        return Layer().forward(x)\n",
        },
        {}, ("pkg.model.Net", "pkg.moe.Layer"), id="a-triton-probe-runs-no-kernel",
    ),
    pytest.param(
        {
            "pkg/ops.py": "import triton.language as tl\nfrom triton import jit\n\n@jit\ndef _k(x_ptr):\n    tl.load(x_ptr)\n\ndef fused(x):\n    _k[(1,)](x)\n",
            "pkg/model.py": "from .ops import fused\n\nclass Net:\n    def forward(self, x):\n        return fused(x)\n",
        },
        {"pkg.model.Net": "at pkg/model.py:5"}, (), id="an-aliased-and-a-from-import-that-are-used",
    ),
    # A probe inside a function guards what the module runs next, often through a package no
    # table knows (axolotl's fp4_cute_available() probes cutlass, then runs a GEMM through quack).
    pytest.param(
        {
            "pkg/fp4.py": (
                "def available():\n    try:\n        import cutlass  # noqa: F401\n    except ImportError:\n"
                "        return False\n    return True\n\ndef gemm(x):\n    from vendor_dsl import run\n    return run(x)\n"
            ),
            "pkg/model.py": "from .fp4 import gemm\n\nclass Net:\n    def forward(self, x):\n        return gemm(x)\n",
        },
        {"pkg.model.Net": "at pkg/model.py:5"}, (), id="a-probe-inside-a-function-still-marks-a-kernel-module",
    ),
    # One whose module imports nothing beyond the standard library, torch and the project gates a
    # path written in PyTorch: inductor needs Triton (unsloth's torch_compile_runtime_available()).
    pytest.param(
        {
            "pkg/speed.py": (
                "import os\nimport sys\n\nfrom . import flags\n\ndef can_compile():\n    if sys.platform != 'win32':\n"
                "        return True\n    try:\n        import triton  # noqa: F401\n    except ImportError:\n"
                "        return False\n    return True\n\ndef snapshot():\n    import torch\n"
                "    return torch.backends.cudnn.benchmark\n"
            ),
            "pkg/flags.py": "",
            "pkg/video.py": "from .speed import snapshot\n\nclass Pipe:\n    def run(self):\n        return snapshot()\n",
        },
        {}, ("pkg.video.Pipe", "pkg.speed.snapshot"), id="a-probe-that-gates-a-pytorch-path-runs-no-kernel",
    ),
    # A kernel language read only for its version (a cache key's fingerprint) runs no kernel,
    # whatever else the module imports (unsloth's diffusion_compile_cache).
    pytest.param(
        {
            "pkg/cache.py": (
                "import diffusers\n\ndef _triton_version():\n    try:\n        import triton\n"
                "        return str(getattr(triton, '__version__', None))\n    except Exception:\n        return None\n\n"
                "def begin(family):\n    return {'triton': _triton_version(), 'family': family}\n"
            ),
            "pkg/pipe.py": "from . import cache\n\nclass Pipe:\n    def run(self):\n        return cache.begin('sdxl')\n",
        },
        {}, ("pkg.pipe.Pipe", "pkg.cache.begin"), id="a-kernel-language-read-for-its-version-runs-no-kernel",
    ),
]


# A class whose method JIT-builds CUDA sources that a subclass names (ColossalAI's
# `_CudaExtension`): no extension name is spelled, so the class itself is the sink.
BUILDER = (
    "class CudaKernel:\n    def sources(self):\n        raise NotImplementedError\n\n"
    "    def build(self):\n        from torch.utils.cpp_extension import load\n"
    "        return load(name='k', sources=self.sources(), extra_cuda_cflags=['-O3'])\n"
)
SWEEPS += [
    pytest.param(
        {
            "pkg/build.py": BUILDER,
            "pkg/scale.py": "from .build import CudaKernel\n\nclass Scale(CudaKernel):\n    def sources(self):\n        return ['s.cu']\n",
            "pkg/loader.py": "from .scale import Scale\n\nclass ScaleLoader:\n    REGISTRY = [Scale]\n",
        },
        {"pkg.build.CudaKernel": "pkg/build.py:7", "pkg.scale.Scale": "pkg/build.py:7", "pkg.loader.ScaleLoader": "pkg/build.py:7"},
        (), id="a-class-that-builds-cuda-sources-its-subclasses-name",
    ),
    pytest.param(
        {
            "pkg/build.py": BUILDER.replace("extra_cuda_cflags=['-O3']", "extra_cflags=['-O3']"),
            "pkg/scale.py": "from .build import CudaKernel\n\nclass Scale(CudaKernel):\n    def sources(self):\n        return ['s.cpp']\n",
        },
        {}, ("pkg.build.CudaKernel", "pkg.scale.Scale"), id="a-host-only-build-is-no-sink",
    ),
]


def test_an_import_through_a_linked_package_folder_follows_its_target(tmp_path):
    # ColossalAI's `colossalai/kernel/extensions` links to the top-level `extensions`: the
    # discovery reads the files once, under the target's name, and the chain goes on there.
    root = write_tree(tmp_path / "proj", {
        "ext/__init__.py": "from .build import CudaKernel\n", "ext/build.py": BUILDER,
        "pkg/__init__.py": "", "pkg/kernel/__init__.py": "",
        "pkg/kernel/loader.py": "from .ext import CudaKernel\n\nclass Loader:\n    REGISTRY = [CudaKernel]\n",
    })
    (root / "pkg" / "kernel" / "ext").symlink_to(root / "ext", target_is_directory=True)
    facts = project_facts(discover([root]).files)
    found = facts.sink("pkg.kernel.loader.Loader")
    assert found is not None and "ext/build.py:7" in found, facts.sink_names


@pytest.mark.parametrize(("files", "sinks", "plain"), SWEEPS)
def test_the_sweep_finds_names_that_reach_a_sink_across_modules(tmp_path, files, sinks, plain):
    facts = project_facts(discover([write_tree(tmp_path / "proj", files)]).files)
    for name, text in sinks.items():
        found = facts.sink(name)
        assert found is not None and text in found, (name, found)
    for name in plain:
        assert facts.sink(name) is None


def _port(root: Path, unsafe: bool, cache: ResultCache | None = None) -> dict[str, tuple[str, list]]:
    found = discover([root])
    config = with_project_facts(Config(), found.files)
    results = process_files(found.files, config, RunOptions(fix=True, unsafe=unsafe), jobs=1, cache=cache)
    out = {}
    for result in results:
        rel = Path(result.path).resolve().relative_to(root.resolve()).as_posix()
        text = (result.new_bytes or Path(result.path).read_bytes()).decode()
        out[rel] = (text, list(result.findings))
    return out


@pytest.fixture(scope="module")
def block_ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return {unsafe: _port(PROJECT, unsafe) for unsafe in (False, True)}


# (file, a line the port must keep as it is, the finding's code on it)
KEPT = [
    pytest.param("checks/block_checks.py", '@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")\ndef test_block_forward', "CN201", id="skip-marker-of-a-test-of-a-kernel-class"),
    pytest.param("checks/block_checks.py", "    if not torch.cuda.is_available():\n        pytest.skip", "CN201", id="skip-helper-called-by-a-kernel-test"),
    pytest.param("checks/block_checks.py", 'block = Block(8).to("cuda")', "CN102", id="device-handed-to-the-kernel-class"),
    pytest.param("checks/block_checks.py", "Block(8).cuda()(x.cuda())", "CN101", id="cuda-call-in-a-kernel-test"),
    pytest.param("train.py", "    if torch.cuda.is_available():\n        mixer = Block(width)", "CN201", id="guard-choosing-the-kernel-class"),
    # `from blocklib import model`, then `model.Block(8)`: the class is called through its module.
    pytest.param("checks/module_checks.py", '    if not torch.cuda.is_available():\n        pytest.skip("needs a GPU")\n    x = torch.randn(2, 8, device="cuda")\n    assert model.Block', "CN201", id="skip-in-front-of-the-kernel-class-called-through-its-module"),
    pytest.param("checks/module_checks.py", 'x = torch.randn(2, 8, device="cuda")\n    assert model.Block', "CN102", id="device-of-a-test-calling-the-kernel-class-through-its-module"),
    pytest.param("checks/module_checks.py", "def _require_gpu():\n    if not torch.cuda.is_available()", "CN201", id="skip-helper-called-by-a-setup-method"),
    pytest.param("checks/module_checks.py", 'self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', "CN102", id="setup-device-read-by-the-kernel-tests"),
    pytest.param("checks/module_checks.py", "def block_device():\n    if not torch.cuda.is_available()", "CN201", id="skip-in-a-fixture-a-kernel-test-takes"),
    pytest.param("checks/module_checks.py", 'return torch.device("cuda")', "CN102", id="device-of-a-fixture-a-kernel-test-takes"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "kept", "code"), KEPT)
def test_a_gate_in_front_of_another_modules_kernel_is_kept(block_ports, unsafe, path, kept, code):
    text, findings = block_ports[unsafe][path]
    assert kept in text
    line = text[: text.index(kept)].count("\n") + 1
    held = [f for f in findings if f.code == code and f.span.start_line in range(line, line + 2) and not f.applied]
    assert held, [(f.code, f.span.start_line, f.message) for f in findings]
    # The message names the class, the sink and the line where the chain enters it.
    assert "blocklib.ops.fused.fused_scale" in held[0].message and "blocklib/model.py:13" in held[0].message


def test_the_portable_class_beside_it_is_still_ported(block_ports):
    for unsafe in (False, True):
        text, _ = block_ports[unsafe]["checks/block_checks.py"]
        assert '@pytest.mark.skipif(not torch.neuron.is_available(), reason="needs a GPU")\ndef test_head_forward' in text
        assert 'head = PlainHead(8).to("neuron")' in text
        text, _ = block_ports[unsafe]["checks/module_checks.py"]
        assert '    if not torch.neuron.is_available():\n        pytest.skip("needs a GPU")\n    x = torch.randn(2, 8, device="neuron")\n    assert model.PlainHead' in text


REGISTRY_PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "projects" / "kernel_registry"


@pytest.fixture(scope="module")
def registry_ports() -> dict[bool, dict[str, tuple[str, list]]]:
    return {unsafe: _port(REGISTRY_PROJECT, unsafe) for unsafe in (False, True)}


# (file, text the port keeps, the finding's code on its first line, or None where the text is the port's)
REGISTRY = [
    pytest.param("kreg/optim.py", "        if torch.cuda.is_available():\n            self.fused = ScaleLoader().load()", "CN201", id="a-guard-in-front-of-a-registry-loader"),
    pytest.param("kreg/optim.py", '    if torch.neuron.is_available():\n        model = model.to("neuron")', None, id="plain-code-beside-it-is-ported"),
]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize(("path", "kept", "code"), REGISTRY)
def test_a_guard_in_front_of_a_kernel_a_registry_names_is_kept(registry_ports, unsafe, path, kept, code):
    text, findings = registry_ports[unsafe][path]
    assert kept in text, text
    if code is not None:
        line = text[: text.index(kept)].count("\n") + 1
        held = [f for f in findings if f.code == code and f.span.start_line in range(line, line + 2) and not f.applied]
        assert held and "kreg/kernels/builder.py:17" in held[0].message, [(f.code, f.span.start_line, f.message) for f in findings]


def test_a_warm_cache_follows_the_module_the_verdict_depends_on(tmp_path):
    # The check's verdict depends on model.py, not on its own bytes: after model.py starts
    # calling the kernel, a warm run must not hand back the port it cached before.
    root = write_tree(tmp_path / "proj", {
        "pkg/__init__.py": "",
        "pkg/ops.py": KERNEL,
        "pkg/model.py": "class Block:\n    def forward(self, x):\n        return x\n",
        "check_block.py": "import torch\nfrom pkg.model import Block\n\ndef run(x):\n    if torch.cuda.is_available():\n        return Block().forward(x)\n    return x\n",
    })
    cache = ResultCache(tmp_path / "cache")
    first = _port(root, False, cache)
    assert "torch.neuron.is_available()" in first["check_block.py"][0]
    (root / "pkg" / "model.py").write_text("from .ops import fused\n\nclass Block:\n    def forward(self, x):\n        return fused(x)\n")
    second = _port(root, False, cache)
    text, findings = second["check_block.py"]
    assert "torch.cuda.is_available()" in text
    assert any("pkg/model.py:5" in f.message for f in findings)


def test_a_project_without_kernels_reads_no_more_files(tmp_path, monkeypatch):
    # Linear and free where nothing is CUDA-only: the chain search starts only from kernels.
    root = write_tree(tmp_path / "proj", {f"pkg/m{i}.py": "import torch\nx = torch.zeros(1)\n" for i in range(5)})
    files = discover([root]).files
    read: list[Path] = []
    original = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or original(self))
    facts = project_facts(files)
    assert not facts.sink_names and len(read) == len(files)


def test_the_fixture_project_copy_is_self_contained(tmp_path):
    # The verdicts come from the project's own modules, wherever it lies.
    copy = tmp_path / "elsewhere"
    shutil.copytree(PROJECT, copy)
    facts = project_facts(discover([copy]).files)
    assert facts.sink("blocklib.Block") and facts.sink("blocklib.model.Block")
    assert facts.sink("blocklib.model.PlainHead") is None


# (file's module, its text, a kernel module, whether the file imports it) — the text filter that
# decides which files the chain search parses: a module named `utils` must not pull in every
# file that imports some other `utils`.
IMPORT_LINES = [
    pytest.param("pkg.model", "from .ops import norm\n", "pkg.ops.norm", True, id="relative-import-of-the-module"),
    pytest.param("pkg.sub.m", "from ..ops.fused import (\n    a,\n    b,\n)\n", "pkg.ops.fused", True, id="parenthesized-two-levels-up"),
    pytest.param("train", "import pkg.ops.norm as n\n", "pkg.ops.norm", True, id="import-as"),
    pytest.param("train", "from pkg.ops import norm\n", "src.pkg.ops.norm", True, id="src-layout-tail"),
    pytest.param("pkg.model", "from other.utils import helper\nfrom .layers import utils_like\n", "pkg.utils", False, id="another-module-of-the-same-last-name"),
    pytest.param("pkg.model", "x = 'from pkg.utils import y'\n", "pkg.utils", False, id="import-words-inside-a-string"),
]


@pytest.mark.parametrize(("module", "text", "kernel", "imports"), IMPORT_LINES)
def test_which_files_the_chain_search_parses(module, text, kernel, imports):
    from cuda2neuron.workspace._project import _imported_modules, _spellings

    found = _imported_modules(text.encode(), module, package_init=False)
    assert (not found.isdisjoint(_spellings({kernel}))) is imports
